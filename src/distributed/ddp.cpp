#include "frugal/distributed/ddp.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/utils.h>

#include <map>
#include <mutex>

#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "gradient_reduction.h"

namespace frugal::dist {

struct DataParallel::State : GradientReduction {
  struct Bucket {
    at::Tensor flat;             // every parameter's gradient, back to back
    int64_t size = 0;            // parameters in it
    int64_t ready = 0;           // of them, gradients final in this backward
    Work work;
  };
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  std::vector<int64_t> bucket_of;  // per parameter
  std::vector<Bucket> buckets;
  std::vector<std::vector<int64_t>> members;  // per bucket, its parameters
  int64_t launched_in_backward = 0;

  // Launches the ready buckets from next_launch on, in order (every rank issues collectives
  // in the same order). `force`: launch them all, ready or not (end of backward).
  void launch_in_order(bool force, bool in_backward) {
    while (next_launch < buckets.size()) {
      Bucket& b = buckets[next_launch];
      if (!force && b.ready < b.size) break;
      b.work = comm->all_reduce(b.flat, Reduce::kSum, /*async=*/true,
                               fmt::format("bucket {}", next_launch));
      if (in_backward) ++launched_in_backward;
      final_gradients.started(next_launch, [this](size_t b) { return finish_bucket(b); });
      ++next_launch;
    }
  }

  // Waits for a bucket's all-reduce; its parameters' gradients are then final.
  std::vector<at::Tensor> finish_bucket(size_t b) {
    buckets[b].work.wait();
    std::vector<at::Tensor> ready;
    for (int64_t p : members[b]) ready.push_back(params[p]);
    return ready;
  }

  void on_gradient(size_t index) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    if (!sync) return;
    mark_reported(index, fmt::format("ddp: parameter '{}'", names[index]));
    ++buckets[bucket_of[index]].ready;
    launch_in_order(/*force=*/false, /*in_backward=*/true);
  }

  void reset_buckets() {
    reset_backward();
    for (Bucket& b : buckets) b.ready = 0;
  }
};

DataParallel::DataParallel(std::shared_ptr<Communicator> comm, double bucket_mb)
    : RankSharding(std::move(comm), "DataParallel"),
      bucket_mb_(bucket_mb),
      state_(std::make_shared<State>()) {
  if (bucket_mb_ <= 0) throw Error("strategy.sharding.bucket_mb: must be > 0");
  state_->comm = comm_;
}

DataParallel::~DataParallel() = default;

GradientReduction& DataParallel::reduction() { return *state_; }

void DataParallel::setup(const ShardingSetup& setup) {
  torch::nn::Module& model = setup.model;
  State& s = *state_;
  if (!s.params.empty()) throw std::logic_error("DataParallel::setup called twice");
  torch::NoGradGuard no_grad;
  // 1. Every rank starts from rank 0's parameters and buffers.
  broadcast_module(*comm_, model);
  for (auto& p : model.named_parameters(/*recurse=*/true)) {
    if (p.value().requires_grad()) {
      s.params.push_back(p.value());
      s.names.push_back(p.key());
    }
  }
  // 2. Buckets, filled in reverse registration order, one dtype/device per bucket.
  const int64_t cap = static_cast<int64_t>(bucket_mb_ * 1024 * 1024);
  s.bucket_of.assign(s.params.size(), -1);
  s.reported.assign(s.params.size(), 0);
  std::vector<std::vector<int64_t>>& members = s.members;
  int64_t bytes = 0;
  for (int64_t i = static_cast<int64_t>(s.params.size()) - 1; i >= 0; --i) {
    const at::Tensor& p = s.params[i];
    const bool fits = !members.empty() && bytes + static_cast<int64_t>(p.nbytes()) <= cap &&
                      s.params[members.back().front()].options().dtype() == p.options().dtype() &&
                      s.params[members.back().front()].device() == p.device();
    if (!fits) {
      members.emplace_back();
      bytes = 0;
    }
    members.back().push_back(i);
    bytes += static_cast<int64_t>(p.nbytes());
  }
  for (const auto& group : members) {
    State::Bucket b;
    int64_t numel = 0;
    for (int64_t i : group) numel += s.params[i].numel();
    const at::Tensor& first = s.params[group.front()];
    b.flat = at::zeros({numel}, first.options().requires_grad(false));
    b.size = static_cast<int64_t>(group.size());
    int64_t offset = 0;
    for (int64_t i : group) {
      at::Tensor& p = s.params[i];
      // The gradient lives in the bucket: accumulation adds into it in place, and the
      // all-reduce needs no copy in or out.
      p.mutable_grad() = b.flat.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      s.bucket_of[i] = static_cast<int64_t>(s.buckets.size());
    }
    s.buckets.push_back(std::move(b));
  }
  // 3. A hook after each parameter's gradient accumulation counts its bucket down.
  std::weak_ptr<State> weak = state_;
  s.hooks = GradientHooks(s.params, [weak](size_t i) {
    if (auto state = weak.lock()) state->on_gradient(i);
  });
  log::info(fmt::format("sharding ddp: {} ranks ({}), {} parameters in {} buckets of <= {} MiB",
                        comm_->size(), comm_->backend(), s.params.size(), s.buckets.size(),
                        bucket_mb_));
}

void DataParallel::begin_micro_step(int64_t index, int64_t count) {
  std::lock_guard<std::recursive_mutex> lock(state_->mutex);
  state_->sync = index == count - 1;
  if (state_->sync) state_->reset_buckets();
}

void DataParallel::finish_gradients() {
  State& s = *state_;
  {
    std::lock_guard<std::recursive_mutex> lock(s.mutex);
    // Buckets whose parameters got no gradient this step (unused in the forward) still
    // take part, with zeros, so that every rank issues the same collectives.
    s.launch_in_order(/*force=*/true, /*in_backward=*/false);
    s.final_gradients.finish_all([&s](size_t b) { return s.finish_bucket(b); });
  }
  for (auto& b : s.buckets) b.work.wait();
}

void DataParallel::zero_grad(torch::optim::Optimizer& optimizer) {
  (void)optimizer;  // every trained parameter's gradient is a view into a bucket
  for (auto& b : state_->buckets) b.flat.zero_();
}

int64_t DataParallel::bucket_count() const { return static_cast<int64_t>(state_->buckets.size()); }
int64_t DataParallel::launched_during_backward() const { return state_->launched_in_backward; }

}  // namespace frugal::dist
