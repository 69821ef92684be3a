// A bounded buffer that keeps the most recent `capacity` items: it grows up to the capacity
// (nothing is reserved up front, so a short recording costs what it holds), then overwrites
// the oldest. Not synchronised: the CPU allocator's history guards it with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace frugal::memory {

template <class T>
class EventRing {
 public:
  explicit EventRing(size_t capacity = 1) : capacity_(capacity < 1 ? 1 : capacity) {}

  void push(const T& item) {
    if (items_.size() < capacity_) {
      items_.push_back(item);
      return;
    }
    items_[next_] = item;
    next_ = (next_ + 1) % capacity_;
    ++dropped_;
  }

  // Oldest first.
  std::vector<T> ordered() const {
    std::vector<T> out;
    out.reserve(items_.size());
    out.insert(out.end(), items_.begin() + static_cast<std::ptrdiff_t>(next_), items_.end());
    out.insert(out.end(), items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(next_));
    return out;
  }

  int64_t dropped() const { return dropped_; }

 private:
  size_t capacity_;
  std::vector<T> items_;
  size_t next_ = 0;  // the oldest item once full
  int64_t dropped_ = 0;
};

}  // namespace frugal::memory
