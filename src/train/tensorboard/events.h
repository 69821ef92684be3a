// TensorBoard's Event protocol buffers (event.proto), built and parsed here alone, from and to
// plain types. The files that include protobuf's headers must not see torch's include folder:
// it ships an older protobuf's headers (ONNX's) that would be found ahead of Debian's. So
// this folder is compiled apart from torch (src/CMakeLists.txt, frugal_tensorboard_events).
#pragma once

#include <cstdint>
#include <optional>
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

// Serialized Events: the first one of a file, and summaries at `step`.
std::string file_version(double wall_time);
std::string scalars(double wall_time, int64_t step,
                    const std::vector<std::pair<std::string, double>>& values);
std::string text(double wall_time, int64_t step, const std::string& tag,
                 const std::string& markdown);
std::string histogram(double wall_time, int64_t step, const std::string& tag, const Histogram& h);

// The step of a serialized Event (0 for the file version); nullopt when it does not parse.
std::optional<int64_t> step_of(std::string_view event);

}  // namespace frugal::tb_events
