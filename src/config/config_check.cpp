#include "frugal/config/config_check.h"

#include <algorithm>

#include "internal.h"

namespace frugal {

void ConfigCheck::one_of(const std::string& value, const std::vector<std::string>& allowed,
                         const std::string& key, const std::string& near) const {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  fail(key,
       fmt::format("unknown value '{}' (expected one of: {}){}", value, list,
                   config_detail::did_you_mean(value, allowed)),
       near);
}

}  // namespace frugal
