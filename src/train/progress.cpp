#include "frugal/train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "frugal/util/log.h"

namespace frugal {

Progress::Progress(const std::string& mode, int64_t first_step, int64_t max_steps,
                   int64_t log_every)
    : first_step_(first_step),
      max_steps_(max_steps),
      log_every_(std::max<int64_t>(1, log_every)),
      start_(std::chrono::steady_clock::now()) {
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  bar_ = mode == "bar" || (mode == "auto" && tty);
  lines_ = mode == "lines" || (mode == "auto" && !tty);
}

Progress::~Progress() { finish(); }

std::string Progress::format_duration(double s) {
  const auto total = static_cast<int64_t>(s + 0.5);
  if (total >= 3600) return fmt::format("{}h{:02d}m", total / 3600, (total % 3600) / 60);
  if (total >= 60) return fmt::format("{}m{:02d}s", total / 60, total % 60);
  return fmt::format("{}s", total);
}

void Progress::update(const ProgressFields& f) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int64_t done = f.step - first_step_;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) *
                                    static_cast<double>(max_steps_ - f.step)
                              : 0.0;
  smoothed_rate_ = smoothed_rate_ == 0.0 ? f.tokens_per_s
                                         : 0.9 * smoothed_rate_ + 0.1 * f.tokens_per_s;
  std::string rate = smoothed_rate_ >= 1e4 ? fmt::format("{:.1f}k", smoothed_rate_ / 1e3)
                                           : fmt::format("{:.0f}", smoothed_rate_);
  if (f.mfu) {
    smoothed_mfu_ = smoothed_mfu_ == 0.0 ? *f.mfu : 0.9 * smoothed_mfu_ + 0.1 * *f.mfu;
    rate += fmt::format(" tok/s MFU {:.1f}%", 100.0 * smoothed_mfu_);
  } else {
    rate += " tok/s";
  }
  smoothed_data_wait_ = smoothed_data_wait_ < 0.0
                            ? f.data_wait_share
                            : 0.9 * smoothed_data_wait_ + 0.1 * f.data_wait_share;
  if (smoothed_data_wait_ > 0.05) {
    rate += fmt::format(" data wait {:.0f}%", 100.0 * smoothed_data_wait_);
  }
  if (bar_) {
    constexpr int kWidth = 24;
    const double frac = max_steps_ > 0 ? static_cast<double>(f.step) / max_steps_ : 1.0;
    const int filled = static_cast<int>(frac * kWidth);
    std::fprintf(stderr, "\r\033[2K%s",
                 fmt::format("step {}/{} [{}{}] {:3.0f}% loss {:.4f} lr {:.2e} {} ETA {}",
                             f.step, max_steps_, std::string(filled, '#'),
                             std::string(kWidth - filled, '.'), frac * 100, f.loss, f.lr, rate,
                             format_duration(eta))
                     .c_str());
    std::fflush(stderr);
    drawn_ = true;
  } else if (lines_ && (f.step % log_every_ == 0 || f.step == max_steps_)) {
    log::info(fmt::format("step {}/{} loss {:.4f} lr {:.2e} {} elapsed {} ETA {}", f.step,
                          max_steps_, f.loss, f.lr, rate, format_duration(elapsed),
                          format_duration(eta)));
  }
}

void Progress::message(const std::string& text) {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[2K");
    std::fflush(stderr);
  }
  log::info(text);
}

void Progress::finish() {
  if (drawn_) {
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace frugal
