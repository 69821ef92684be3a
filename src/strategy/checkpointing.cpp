#include "frugal/strategy/checkpointing.h"

#include <map>
#include <memory>
#include <set>

#include "frugal/config/named_registry.h"
#include "frugal/models/blocks.h"
#include "frugal/models/unit.h"
#include "frugal/strategy/recompute.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace frugal {
namespace {

using ModulePtr = std::shared_ptr<torch::nn::Module>;

Error fail(const std::string& message) { return Error("checkpointing: " + message); }

Unit& as_unit(const ModulePtr& m, const std::string& path) {
  auto* unit = dynamic_cast<Unit*>(m.get());
  if (unit == nullptr) {
    throw fail(path + " is a " + m->name() + ", not a frugal::Unit: derive it from frugal::Unit " +
               "or call frugal::checkpoint in its forward");
  }
  return *unit;
}

NamedRegistry<CheckpointingPolicy>& policies() {
  static NamedRegistry<CheckpointingPolicy> r(
      "strategy.checkpointing.policy", "policy",
      {
          {"none",
           [](int64_t, int64_t, const CheckpointingConfig&) { return std::vector<std::string>{}; }},
          {"full", [](int64_t, int64_t,
                      const CheckpointingConfig&) { return std::vector<std::string>{""}; }},
          {"every_k",
           [](int64_t i, int64_t, const CheckpointingConfig& cfg) {
             return i % cfg.k == 0 ? std::vector<std::string>{""} : std::vector<std::string>{};
           }},
          {"selective",
           [](int64_t, int64_t, const CheckpointingConfig& cfg) {
             // A target named twice is wrapped once.
             const std::set<std::string> unique(cfg.targets.begin(), cfg.targets.end());
             return std::vector<std::string>(unique.begin(), unique.end());
           }},
      },
      /*validated=*/true);
  return r;
}

// Built when the library loads, so that config validation knows the built-in names before
// anything asked for this registry.
[[maybe_unused]] const bool kCheckpointingNamesAtLoad = (policies(), true);

CheckpointingPolicy find_policy(const std::string& name) { return policies().get(name); }

void validate(const CheckpointingConfig& cfg, const std::vector<std::string>& block_lists) {
  if (cfg.policy == kAutoCheckpointing) {
    throw fail("policy auto is chosen from the memory budget before the model is wrapped: "
               "resolve it first (memory::resolve_auto_checkpointing; frugal train does)");
  }
  (void)find_policy(cfg.policy);
  const CheckpointingKind kind = checkpointing_kind(cfg.policy);
  if (kind == CheckpointingKind::none) return;
  if (kind == CheckpointingKind::every_k && cfg.k < 1) {
    throw fail("every_k needs k >= 1, got " + std::to_string(cfg.k));
  }
  if (kind == CheckpointingKind::selective && cfg.targets.empty()) {
    throw fail("selective needs targets (child units of each block, e.g. [attn, mlp])");
  }
  if (block_lists.empty()) {
    throw fail("policy " + cfg.policy + " needs the model's block lists (Model::block_lists(), " +
               "e.g. {\"blocks\"}), and none were given");
  }
}

// The units `cfg` selects, by path; throws before anything is changed.
std::vector<std::pair<std::string, Unit*>> select_units(
    torch::nn::Module& model, const CheckpointingConfig& cfg,
    const std::vector<std::string>& block_lists) {
  std::vector<std::pair<std::string, Unit*>> units;
  if (!checkpointing_enabled(cfg)) return units;
  const CheckpointingPolicy policy = find_policy(cfg.policy);
  // Blocks by list, so that `index` and `count` are the position within each list.
  std::map<std::string, std::vector<Block>> by_list;
  for (Block& b : list_blocks(model, block_lists, "checkpointing")) {
    by_list[b.path.substr(0, b.path.rfind('.'))].push_back(std::move(b));
  }
  for (const std::string& list_name : block_lists) {
    const std::vector<Block>& blocks = by_list[list_name];
    const auto count = static_cast<int64_t>(blocks.size());
    for (int64_t i = 0; i < count; ++i) {
      const ModulePtr& block = blocks[i].module;
      const std::string& path = blocks[i].path;
      for (const std::string& target : policy(i, count, cfg)) {
        if (target.empty()) {
          units.emplace_back(path, &as_unit(block, path));
          continue;
        }
        const auto children = block->named_children();
        const ModulePtr* child = children.find(target);
        if (child == nullptr) {
          throw fail("policy " + cfg.policy + ": target '" + target + "' is not a child of " +
                     path + " (its children: " + child_names(*block) + ")");
        }
        units.emplace_back(path + "." + target, &as_unit(*child, path + "." + target));
      }
    }
  }
  return units;
}

}  // namespace

void register_checkpointing_policy(const std::string& name, CheckpointingPolicy policy) {
  if (name.empty() || !policy) throw std::invalid_argument("register_checkpointing_policy: empty");
  // auto is no policy of the registry (it is replaced by one before any model is wrapped),
  // but the name is taken all the same.
  if (name == kAutoCheckpointing) {
    throw Error("register_checkpointing_policy: the name auto is taken (strategy.checkpointing."
                "policy auto chooses a policy from the memory budget)");
  }
  policies().add(name, std::move(policy));
}

CheckpointingKind checkpointing_kind(const std::string& policy) {
  // The built-in names of policies() above; the registry refuses them to users.
  if (policy == "none") return CheckpointingKind::none;
  if (policy == "full") return CheckpointingKind::full;
  if (policy == "every_k") return CheckpointingKind::every_k;
  if (policy == "selective") return CheckpointingKind::selective;
  return CheckpointingKind::registered;
}

bool checkpointing_enabled(const CheckpointingConfig& cfg) {
  return checkpointing_kind(cfg.policy) != CheckpointingKind::none;
}

void checkpoint_unit(Unit& unit) {
  unit.set_wrapper(kCheckpointWrapperName, wrap_layer::kCheckpoint,
                   [](const at::Tensor& x, const UnitFn& inner) { return checkpoint(inner, x); });
}

int64_t remove_checkpointing(torch::nn::Module& model) {
  // include_self would need `model` to be owned by a shared_ptr; the root is checked apart.
  std::vector<torch::nn::Module*> all = {&model};
  for (const ModulePtr& m : model.modules(/*include_self=*/false)) all.push_back(m.get());
  int64_t removed = 0;
  for (torch::nn::Module* m : all) {
    auto* unit = dynamic_cast<Unit*>(m);
    if (unit != nullptr && unit->remove_wrapper(kCheckpointWrapperName)) ++removed;
  }
  return removed;
}

int64_t apply_checkpointing(torch::nn::Module& model, const CheckpointingConfig& cfg,
                            const std::vector<std::string>& block_lists) {
  validate(cfg, block_lists);
  const auto units = select_units(model, cfg, block_lists);
  const int64_t removed = remove_checkpointing(model);
  for (const auto& [path, unit] : units) checkpoint_unit(*unit);
  const auto count = static_cast<int64_t>(units.size());
  if (count > 0 || removed > 0) {
    std::string message = "checkpointing: policy " + cfg.policy;
    const bool every_k = checkpointing_kind(cfg.policy) == CheckpointingKind::every_k;
    if (every_k) message += " (k=" + std::to_string(cfg.k) + ")";
    message += " wraps " + std::to_string(count) + " units";
    if (count > 0) message += ", first " + units.front().first + ", last " + units.back().first;
    log::info(message);
  }
  return count;
}

}  // namespace frugal
