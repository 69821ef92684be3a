// TensorBoard's Event protocol buffers (event.proto), built and parsed in a library of their
// own, libfrugal_tensorboard_events.so, reached through plain types. Why apart:
// - Debian's libsentencepiece (which libfrugal links) has an older protobuf-lite compiled in
//   and exports it. Found first in the process's symbol scope, it took the generated code's
//   calls to the protobuf runtime, and the first SerializeAsString crashed. Loaded with
//   RTLD_DEEPBIND, the events library binds to its own dependency, Debian's libprotobuf-lite,
//   first; SentencePiece keeps binding to its copy. (Debian's static libprotobuf-lite.a
//   cannot be linked into a shared library: its arena uses local-exec TLS.) Checked with
//   LD_DEBUG=bindings: of libprotobuf-lite's ~850 bindings, two go to SentencePiece's copy,
//   the static of ShutdownData::get() (a GNU unique symbol, one per process by definition),
//   the list of what ShutdownProtobufLibrary would free, which nothing here calls.
// - torch's include folder ships an older protobuf's headers (ONNX's), found ahead of
//   Debian's: the events library is compiled without torch's include folder.
// The wheel's own protobuf runtime is inside libtorch_cpu with its symbols hidden.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace frugal::tb_events {

struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> limits;  // bucket i holds (limits[i-1], limits[i]]
  std::vector<double> counts;
};

// What the events library offers; every function returns a serialized Event.
struct Table {
  // The first event of a file.
  std::string (*file_version)(double wall_time);
  std::string (*scalars)(double wall_time, int64_t step,
                         const std::vector<std::pair<std::string, double>>& values);
  std::string (*text)(double wall_time, int64_t step, const std::string& tag,
                      const std::string& markdown);
  std::string (*histogram)(double wall_time, int64_t step, const std::string& tag,
                           const Histogram& h);
  // The step of a serialized Event (0 for the file version); false when it does not parse.
  bool (*step_of)(std::string_view event, int64_t* step);
};

// The events library, loaded once from libfrugal's own folder; frugal::Error naming the file
// when it cannot be loaded.
const Table& table();

}  // namespace frugal::tb_events

// The events library's one exported symbol.
extern "C" const frugal::tb_events::Table* frugal_tensorboard_events_v1();
