// Training progress on the terminal: a bar redrawn in place on a tty, plain log lines
// otherwise (CI logs, files, pipes). mode: auto | bar | lines | none.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace frugal {

struct ProgressFields {
  int64_t step = 0;
  int64_t max_steps = 0;
  double loss = 0.0;
  double lr = 0.0;
  double tokens_per_s = 0.0;
  std::optional<double> mfu;  // shown when known
  // Share of the step's wall time spent waiting for data (0..1); shown above 5%, where the
  // loader, not the model, is what to speed up.
  double data_wait_share = 0.0;
};

class Progress {
 public:
  Progress(const std::string& mode, int64_t first_step, int64_t max_steps, int64_t log_every);
  ~Progress();
  void update(const ProgressFields& f);
  // Prints a message without tearing the bar (clears the line, prints, redraws later).
  void message(const std::string& text);
  void finish();

  static std::string format_duration(double seconds);  // "1h02m", "3m07s", "12s"

 private:
  bool bar_ = false;
  bool lines_ = false;
  bool drawn_ = false;
  int64_t first_step_;
  int64_t max_steps_;
  int64_t log_every_;
  double smoothed_rate_ = 0.0;  // tokens/s, exponentially averaged so the bar does not flicker
  double smoothed_mfu_ = 0.0;   // the same for the model FLOPs utilisation
  double smoothed_data_wait_ = -1.0;  // and the data-wait share (-1: none seen yet)
  std::chrono::steady_clock::time_point start_;
};

}  // namespace frugal
