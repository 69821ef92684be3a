// model.type convnet: a classifier of square images.
#include "builtin_specs.h"
#include "frugal/models/convnet.h"

namespace frugal::models_detail {

ModelSpec convnet_spec() {
  ModelSpec s;
  s.build = [](const ModelConfig& c) {
    return std::make_shared<ConvNet>(c.in_channels, c.image_size, c.channels, c.num_classes);
  };
  const KeyRule size = KeyRule::at_least(1);
  s.keys = {{"in_channels", size}, {"image_size", size}, {"channels", size}, {"num_classes", size}};
  s.check = [](const ModelConfig& m, const DataConfig&, const ConfigCheck& c) {
    c.require(!m.channels.empty(), "model.channels", "must list at least one layer");
  };
  s.inputs = ModelSpec::Inputs::images;
  s.classes = [](const ModelConfig& m) { return m.num_classes; };
  return s;
}

}  // namespace frugal::models_detail
