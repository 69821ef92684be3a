// The names a strategy setting accepts: the built-in ones and those user code registered
// (frugal::register_precision, register_checkpointing_policy, register_sharding register
// theirs here), so that a config naming a registered strategy validates, and a typo still gets
// file:line:column and a did-you-mean.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace frugal {

// key: "strategy.precision", "strategy.checkpointing.policy" or "strategy.sharding.mode".
void register_strategy_name(std::string_view key, const std::string& name);
// Built-in names first, then registered ones, in registration order; then `auto` where the
// key has it (precision, checkpointing policy).
std::vector<std::string> strategy_names(std::string_view key);

}  // namespace frugal
