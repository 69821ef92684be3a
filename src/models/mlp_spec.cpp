// model.type mlp: a classifier of feature vectors.
#include "builtin_specs.h"
#include "frugal/models/mlp.h"

namespace frugal::models_detail {

ModelSpec mlp_spec() {
  ModelSpec s;
  s.build = [](const ModelConfig& c) {
    return std::make_shared<Mlp>(c.in_features, c.hidden, c.out_features);
  };
  s.keys = {"in_features", "hidden", "out_features"};
  s.check = [](const ModelConfig& m, const DataConfig&, const ConfigCheck& c) {
    c.at_least<int64_t>(m.in_features, 1, "model.in_features");
    for (int64_t h : m.hidden) c.at_least<int64_t>(h, 1, "model.hidden");
    c.at_least<int64_t>(m.out_features, 1, "model.out_features");
  };
  s.inputs = ModelSpec::Inputs::features;
  s.classes = [](const ModelConfig& m) { return m.out_features; };
  return s;
}

}  // namespace frugal::models_detail
