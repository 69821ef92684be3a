// libfrugal_tensorboard_events.so (events.h says why it is a library of its own).
#include "train/tensorboard/events.h"

#include "train/tensorboard/event.pb.h"

namespace frugal::tb_events {
namespace {
namespace pb = frugal::tensorboard;

pb::Event at_step(double wall_time, int64_t step) {
  pb::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  return event;
}

std::string file_version(double wall_time) {
  pb::Event event;
  event.set_wall_time(wall_time);
  event.set_file_version("brain.Event:2");
  return event.SerializeAsString();
}

std::string scalars(double wall_time, int64_t step,
                    const std::vector<std::pair<std::string, double>>& values) {
  pb::Event event = at_step(wall_time, step);
  for (const auto& [tag, value] : values) {
    pb::Summary::Value* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));  // the format's scalars are float32
  }
  return event.SerializeAsString();
}

std::string text(double wall_time, int64_t step, const std::string& tag,
                 const std::string& markdown) {
  pb::Event event = at_step(wall_time, step);
  pb::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  // The text plugin finds its data by this name; the tensor is a scalar string (no dims).
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  pb::TensorProto* t = v->mutable_tensor();
  t->set_dtype(pb::DT_STRING);
  t->mutable_tensor_shape();
  t->add_string_val(markdown);
  return event.SerializeAsString();
}

std::string histogram(double wall_time, int64_t step, const std::string& tag, const Histogram& h) {
  pb::Event event = at_step(wall_time, step);
  pb::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  pb::HistogramProto* out = v->mutable_histo();
  out->set_min(h.min);
  out->set_max(h.max);
  out->set_num(h.num);
  out->set_sum(h.sum);
  out->set_sum_squares(h.sum_squares);
  for (double limit : h.limits) out->add_bucket_limit(limit);
  for (double count : h.counts) out->add_bucket(count);
  return event.SerializeAsString();
}

bool step_of(std::string_view bytes, int64_t* step) {
  pb::Event event;
  if (!event.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return false;
  *step = event.step();
  return true;
}

}  // namespace
}  // namespace frugal::tb_events

extern "C" __attribute__((visibility("default"))) const frugal::tb_events::Table*
frugal_tensorboard_events_v1() {
  namespace e = frugal::tb_events;
  static const e::Table table{e::file_version, e::scalars, e::text, e::histogram, e::step_of};
  return &table;
}
