// Activation checkpointing policies (strategy.checkpointing): which units of a model drop their
// activations after forward and recompute them in backward (frugal::checkpoint).
//
//   none       nothing is checkpointed
//   full       every block of the model's block lists
//   every_k    blocks 0, k, 2k, ... of each list
//   selective  inside every block, the child units named in `targets` (e.g. attn, mlp)
//
// Blocks are the elements of the named torch::nn::ModuleList children (Model::block_lists(),
// e.g. {"blocks"}; dotted paths such as "encoder.layers" work too). What gets wrapped must be
// a frugal::Unit. The wrapper sits at wrap_layer::kCheckpoint, inside sharding's gather.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frugal/config/config.h"

namespace frugal {

class Unit;

// A checkpointing policy decides, for block `index` of the `count` blocks of a block list,
// which of its units to checkpoint: "" for the whole block, child names (e.g. "attn") for
// parts of it, nothing to leave it alone. The built-in ones are policies too (full: {""};
// every_k: {""} when index % k == 0; selective: cfg.targets).
using CheckpointingPolicy = std::function<std::vector<std::string>(
    int64_t index, int64_t count, const CheckpointingConfig& cfg)>;
// Makes `name` a valid strategy.checkpointing.policy, in YAML and in code; a name already
// taken (built in or registered) is a frugal::Error.
void register_checkpointing_policy(const std::string& name, CheckpointingPolicy policy);

// The built-in policies, for code that branches on one (its parameters, the planner's
// estimates) instead of comparing names; `registered` is any other name, a user's policy or
// one that is not known at all (apply_checkpointing tells those apart).
enum class CheckpointingKind { none, full, every_k, selective, registered };
CheckpointingKind checkpointing_kind(const std::string& policy);
// Whether `cfg` checkpoints at all: every policy but none. (A registered policy counts as on
// even if it picks no unit of a given model; only applying it can tell.)
bool checkpointing_enabled(const CheckpointingConfig& cfg);

// strategy.checkpointing.policy: auto, which the trainer replaces by a policy before any model
// is wrapped (memory/auto_policy.h); apply_checkpointing refuses it.
inline constexpr const char* kAutoCheckpointing = "auto";

// The name checkpointing's wrapper has on a Unit (Unit::has_wrapper).
inline constexpr const char* kCheckpointWrapperName = "checkpoint";

// Applies `cfg` to `model`, replacing any checkpointing applied before (so applying twice
// wraps once, and policy none removes it). Everything is validated before anything is
// wrapped: an unknown policy, k < 1, a missing block list or selective target, or a block /
// target that is not a frugal::Unit is a frugal::Error and leaves the model as it was.
// Returns the number of units wrapped (also logged).
int64_t apply_checkpointing(torch::nn::Module& model, const CheckpointingConfig& cfg,
                            const std::vector<std::string>& block_lists);

// Checkpoints one unit, for use without the policies.
void checkpoint_unit(Unit& unit);
// Removes checkpointing from every Unit in `model`; returns how many were unwrapped.
int64_t remove_checkpointing(torch::nn::Module& model);

}  // namespace frugal
