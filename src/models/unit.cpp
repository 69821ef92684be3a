#include "frugal/models/unit.h"

#include <algorithm>
#include <stdexcept>

namespace frugal {

at::Tensor Unit::forward(const at::Tensor& x, const UnitExtras& extras) {
  return run_from(0, x, extras);
}

at::Tensor Unit::forward_impl(const at::Tensor&) {
  throw std::logic_error("frugal::Unit: override forward_impl(x) or forward_impl_extras(x, extras)");
}

at::Tensor Unit::forward_impl_extras(const at::Tensor& x, const UnitExtras& extras) {
  if (!extras.empty()) {
    throw std::logic_error("frugal::Unit: this unit takes no extras (override forward_impl_extras)");
  }
  return forward_impl(x);
}

at::Tensor Unit::run_from(size_t i, const at::Tensor& x, const UnitExtras& extras) {
  if (i == wrappers_.size()) return forward_impl_extras(x, extras);
  // The inner function may outlive this call: checkpointing keeps it for the recompute in
  // backward, so it captures the position and its own copy of the extras (tensor handles),
  // not references to locals.
  UnitFn inner = [this, i, extras](const at::Tensor& y) { return run_from(i + 1, y, extras); };
  return wrappers_[i].wrap(x, inner);
}

void Unit::set_wrapper(const std::string& name, int layer, UnitWrapper wrapper) {
  remove_wrapper(name);
  // Outermost first: the new entry goes before the first one it runs outside of, i.e. before
  // the first entry whose layer is not higher (equal layers: the newest is outermost).
  auto pos = std::find_if(wrappers_.begin(), wrappers_.end(),
                          [&](const Entry& e) { return e.layer <= layer; });
  wrappers_.insert(pos, Entry{name, layer, std::move(wrapper)});
}

bool Unit::remove_wrapper(const std::string& name) {
  auto it = std::find_if(wrappers_.begin(), wrappers_.end(),
                         [&](const Entry& e) { return e.name == name; });
  if (it == wrappers_.end()) return false;
  wrappers_.erase(it);
  return true;
}

bool Unit::has_wrapper(const std::string& name) const {
  return std::any_of(wrappers_.begin(), wrappers_.end(),
                     [&](const Entry& e) { return e.name == name; });
}

void Unit::clear_wrappers() { wrappers_.clear(); }

std::vector<std::string> Unit::wrapper_names() const {
  std::vector<std::string> names;
  names.reserve(wrappers_.size());
  for (const auto& e : wrappers_) names.push_back(e.name);
  return names;
}

}  // namespace frugal
