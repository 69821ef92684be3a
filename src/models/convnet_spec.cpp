// model.type convnet: a classifier of square images.
#include "builtin_specs.h"
#include "frugal/models/convnet.h"

namespace frugal::models_detail {

ModelSpec convnet_spec() {
  ModelSpec s;
  s.build = [](const ModelConfig& c) {
    return std::make_shared<ConvNet>(c.in_channels, c.image_size, c.channels, c.num_classes);
  };
  s.keys = {"in_channels", "image_size", "channels", "num_classes"};
  s.check = [](const ModelConfig& m, const DataConfig&, const ConfigCheck& c) {
    c.at_least<int64_t>(m.in_channels, 1, "model.in_channels");
    c.at_least<int64_t>(m.image_size, 1, "model.image_size");
    c.require(!m.channels.empty(), "model.channels", "must list at least one layer");
    for (int64_t ch : m.channels) c.at_least<int64_t>(ch, 1, "model.channels");
    c.at_least<int64_t>(m.num_classes, 1, "model.num_classes");
  };
  s.inputs = ModelSpec::Inputs::images;
  s.classes = [](const ModelConfig& m) { return m.num_classes; };
  return s;
}

}  // namespace frugal::models_detail
