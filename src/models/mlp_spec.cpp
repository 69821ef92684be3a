// model.type mlp: a classifier of feature vectors.
#include "builtin_specs.h"
#include "frugal/models/mlp.h"

namespace frugal::models_detail {

ModelSpec mlp_spec() {
  ModelSpec s;
  s.build = [](const ModelConfig& c) {
    return std::make_shared<Mlp>(c.in_features, c.hidden, c.out_features);
  };
  const KeyRule size = KeyRule::at_least(1);
  s.keys = {{"in_features", size}, {"hidden", size}, {"out_features", size}};
  s.inputs = ModelSpec::Inputs::features;
  s.classes = [](const ModelConfig& m) { return m.out_features; };
  return s;
}

}  // namespace frugal::models_detail
