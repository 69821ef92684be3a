#include "frugal/train/tensorboard.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "frugal/io/atomic_file.h"
#include "frugal/util/error.h"
#include "train/tensorboard/events.h"
#include "train/tensorboard/tfrecord.h"

namespace fs = std::filesystem;

namespace frugal {
namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

bool is_event_file(const fs::path& p) {
  return p.filename().string().rfind("events.out.tfevents.", 0) == 0;
}

// A resumed run continues from `step`: the events after it (written before a crash or a stop
// past the checkpoint) would be there twice, so each file in `dir` keeps only the events up to
// it. Rewritten atomically: a crash here leaves the old file or the trimmed one.
void trim_event_files(const fs::path& dir, int64_t step) {
  if (!fs::is_directory(dir)) return;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || !is_event_file(entry.path())) continue;
    const std::string bytes = io::read_file(entry.path());
    std::string kept;
    bool dropped = false;
    size_t read = 0;
    for (const std::string& record : tfrecord::records(bytes)) {
      read += record.size() + 16;
      // The file version (step 0) is always kept; an unparsable record is dropped.
      int64_t at = 0;
      if (!tb_events::table().step_of(record, &at) || at > step) {
        dropped = true;
        continue;
      }
      kept += tfrecord::frame(record);
    }
    if (dropped || read != bytes.size()) io::write_file_atomic(entry.path(), kept);
  }
}

}  // namespace

struct TensorBoardWriter::Impl {
  fs::path file;
  std::FILE* out = nullptr;

  void write(const std::string& event) {
    const std::string record = tfrecord::frame(event);
    if (std::fwrite(record.data(), 1, record.size(), out) != record.size()) {
      throw Error(fmt::format("cannot write '{}': {}", file.string(), std::strerror(errno)));
    }
  }
};

TensorBoardWriter::TensorBoardWriter(const fs::path& dir, const std::string& file_suffix,
                                     int64_t keep_up_to_step)
    : impl_(std::make_unique<Impl>()) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create '{}': {}", dir.string(), ec.message()));
  if (keep_up_to_step >= 0) trim_event_files(dir, keep_up_to_step);
  const double now = unix_seconds();
  impl_->file = dir / fmt::format("events.out.tfevents.{}.{}{}", static_cast<int64_t>(now),
                                  host_name(), file_suffix);
  // Appending: a file of the same second and host (a quick resume) goes on, after its trim.
  impl_->out = std::fopen(impl_->file.c_str(), "ab");
  if (!impl_->out) {
    throw Error(fmt::format("cannot open '{}' for writing: {}", impl_->file.string(),
                            std::strerror(errno)));
  }
  impl_->write(tb_events::table().file_version(now));
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (impl_ && impl_->out) std::fclose(impl_->out);
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  add_scalars({{tag, value}}, step);
}

void TensorBoardWriter::add_scalars(const std::vector<std::pair<std::string, double>>& values,
                                    int64_t step) {
  if (!values.empty()) impl_->write(tb_events::table().scalars(unix_seconds(), step, values));
}

void TensorBoardWriter::add_text(const std::string& tag, const std::string& markdown,
                                 int64_t step) {
  impl_->write(tb_events::table().text(unix_seconds(), step, tag, markdown));
}

void TensorBoardWriter::add_histogram(const std::string& tag, const at::Tensor& values,
                                      int64_t step, int64_t bins) {
  const at::Tensor x = values.detach().flatten().to(at::kCPU, at::kDouble);
  if (x.numel() == 0) return;
  tb_events::Histogram h;
  h.min = x.min().item<double>();
  h.max = x.max().item<double>();
  h.num = static_cast<double>(x.numel());
  h.sum = x.sum().item<double>();
  h.sum_squares = x.square().sum().item<double>();
  // Bucket i holds (limit[i-1], limit[i]]; histc counts [min, max] in equal widths, the last
  // bucket closed on both sides: the same partition up to values on a boundary.
  bins = h.max > h.min ? std::max<int64_t>(1, bins) : 1;
  const at::Tensor counts = at::histc(x, bins, h.min, h.max).contiguous();
  const double* c = counts.const_data_ptr<double>();
  for (int64_t i = 0; i < bins; ++i) {
    h.limits.push_back(i + 1 == bins ? h.max
                                     : h.min + (h.max - h.min) * static_cast<double>(i + 1) / bins);
    h.counts.push_back(c[i]);
  }
  impl_->write(tb_events::table().histogram(unix_seconds(), step, tag, h));
}

void TensorBoardWriter::flush() {
  if (std::fflush(impl_->out) != 0) {
    throw Error(fmt::format("cannot write '{}': {}", impl_->file.string(), std::strerror(errno)));
  }
}

const fs::path& TensorBoardWriter::file() const { return impl_->file; }

}  // namespace frugal
