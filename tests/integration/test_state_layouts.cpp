// Checkpoints move between layouts exactly: a whole state (sharding none) written, loaded by a
// zero3 engine (Gloo, world 1), written again in shards and loaded by a new whole engine gives
// back every parameter and every optimizer moment bit for bit; the engines that loaded it
// then step exactly as the one that wrote it. (At world > 1 the moves are the same; the later
// steps differ only by summation order: tests/multiproc/test_sharded_checkpoint.cpp.)
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <map>

#include "frugal/distributed/checkpoint_reader.h"
#include "frugal/distributed/communicator.h"
#include "frugal/engine/engine.h"
#include "frugal/io/checkpoint.h"
#include "frugal/models/gpt.h"
#include "frugal/optim/optimizer.h"
#include "support/helpers.h"

using namespace frugal;

namespace {

struct Run {
  std::shared_ptr<Gpt> model;
  std::unique_ptr<Engine> engine;
};

Run make_run(const std::string& mode, const std::shared_ptr<dist::Communicator>& comm,
             bool offload = false) {
  at::manual_seed(11);  // the same initialisation for every run: only what is loaded differs
  Run r;
  r.model = std::make_shared<Gpt>(GptOptions::sized(32, 16, 2, 2, 32));
  StrategyConfig sc;
  sc.sharding.mode = mode;
  sc.offload.optimizer = offload;
  r.engine = std::make_unique<Engine>(EngineOptions{sc, 0.5}, mode == "none" ? nullptr : comm);
  OptimConfig oc;
  oc.lr = 3e-3;
  oc.weight_decay = 0.1;
  r.engine->setup(r.model, make_optimizer(oc, *r.model));
  return r;
}

void step(Run& r, int64_t seed) {
  at::manual_seed(seed);
  Batch b{at::randint(0, 32, {4, 16}, at::kLong), at::randint(0, 32, {4, 16}, at::kLong)};
  r.engine->step(b, [&](const Batch& mb) { return r.model->loss_sum(r.model->forward(mb.x), mb.y); });
}

// Writes the engine's state as a checkpoint of `step` (shards when it has them).
std::filesystem::path save(Engine& engine, const std::filesystem::path& dir, int64_t step) {
  StateDict state = engine.state_dict();
  const int writers = state.layout_json.empty() ? 0 : 1;
  begin_sharded_checkpoint(dir, step);
  if (writers > 0) write_checkpoint_shard(dir, step, 0, 1, state.shard);
  Checkpoint ckpt;
  ckpt.step = step;
  ckpt.model = state.model;
  ckpt.optimizer = state.optimizer;
  ckpt.state = state.state;
  ckpt.meta_json = writers > 0 ? "{\"sharding\": " + state.layout_json + "}" : "{}";
  return publish_sharded_checkpoint(dir, ckpt, writers, 0);
}

std::map<std::string, at::Tensor> by_name(const io::NamedTensors& t) { return {t.begin(), t.end()}; }

void check_equal(const std::map<std::string, at::Tensor>& a,
                 const std::map<std::string, at::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    CHECK(at::equal(t, b.at(name).to(t.dtype())));
  }
}

}  // namespace

TEST_CASE("a checkpoint moves between whole and sharded layouts bit for bit",
          "[integration][checkpoint][layout]") {
  test::TempDir dir("frugal-layouts");
  auto comm = dist::init_from_env(DistributedConfig{}, dist::RankInfo{});  // Gloo, rank 0 of 1

  Run whole = make_run("none", nullptr);
  for (int64_t s = 0; s < 3; ++s) step(whole, 100 + s);
  const auto saved_whole = save(*whole.engine, dir / "a", 3);
  const StateDict original = whole.engine->state_dict();
  REQUIRE_FALSE(original.optimizer.empty());

  // Whole -> zero3: a different layout (false), every value in its shard.
  Run zero = make_run("zero3", comm);
  dist::CheckpointReader whole_reader(saved_whole, 0);
  CHECK_FALSE(zero.engine->load_state_dict(whole_reader));
  const auto saved_sharded = save(*zero.engine, dir / "b", 3);

  dist::CheckpointReader sharded(saved_sharded, 0);
  REQUIRE(sharded.has_shards());
  {
    INFO("the shards, put back together by name, are the whole state");
    check_equal(sharded.whole("param"), by_name(original.model));
    for (const std::string& kind : sharded.optimizer_kinds()) {
      std::map<std::string, at::Tensor> expected;
      for (const auto& [key, t] : original.optimizer) {
        if (key.size() > kind.size() && key.compare(key.size() - kind.size() - 1, std::string::npos, "/" + kind) == 0) {
          expected[key.substr(0, key.size() - kind.size() - 1)] = t;
        }
      }
      INFO(kind);
      check_equal(sharded.whole(kind), expected);
    }
    CHECK(sharded.optimizer_kinds() == std::vector<std::string>{"exp_avg", "exp_avg_sq", "step"});
  }
  {
    INFO("sharded -> whole, with the optimizer offloaded: the original state bit for bit");
    Run back = make_run("none", nullptr, /*offload=*/true);
    CHECK_FALSE(back.engine->load_state_dict(sharded));
    const StateDict again = back.engine->state_dict();
    check_equal(by_name(again.model), by_name(original.model));
    check_equal(by_name(again.optimizer), by_name(original.optimizer));
    // And it trains on exactly as the run that wrote it.
    step(whole, 200);
    step(back, 200);
    auto a = whole.model->parameters(), b = back.model->parameters();
    for (size_t i = 0; i < a.size(); ++i) CHECK(at::equal(a[i], b[i]));
  }
  {
    INFO("the same layout loads as saved (true)");
    Run same = make_run("zero3", comm);
    dist::CheckpointReader reader(saved_sharded, 0);
    CHECK(same.engine->load_state_dict(reader));
  }
}
