#include <fmt/format.h>

#include <stdexcept>

#include "frugal/data/dataset.h"

namespace frugal {

namespace {

class Slice : public Dataset {
 public:
  Slice(std::shared_ptr<const Dataset> base, int64_t first, int64_t count)
      : base_(std::move(base)), first_(first), count_(count) {}

  int64_t size() const override { return count_; }

  Batch get(const std::vector<int64_t>& indices) const override {
    std::vector<int64_t> shifted(indices);
    for (int64_t& i : shifted) {
      if (i < 0 || i >= count_) {
        throw std::out_of_range(fmt::format("slice: sample {} outside [0, {})", i, count_));
      }
      i += first_;
    }
    return base_->get(shifted);
  }

 private:
  std::shared_ptr<const Dataset> base_;
  int64_t first_, count_;
};

}  // namespace

std::shared_ptr<Dataset> slice(std::shared_ptr<const Dataset> base, int64_t first, int64_t count) {
  if (first < 0 || count < 0 || first + count > base->size()) {
    throw std::out_of_range(
        fmt::format("slice: [{}, {}) outside [0, {})", first, first + count, base->size()));
  }
  return std::make_shared<Slice>(std::move(base), first, count);
}

}  // namespace frugal
