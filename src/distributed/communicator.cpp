#include "frugal/distributed/communicator.h"

#include <ATen/Context.h>
#include <ATen/ops/full.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <cstdlib>

#include "c10d_group.h"
#include "store_socket.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "frugal/util/trace.h"

namespace frugal::dist {

void Work::wait() {
  if (!wait_) return;
  auto wait = std::move(wait_);
  wait_ = nullptr;
  wait();
}

void Communicator::count(const std::string& op, int64_t payload, double sent_factor) {
  Traffic& t = traffic_[op];
  ++t.calls;
  t.payload_bytes += payload;
  t.sent_bytes += static_cast<int64_t>(static_cast<double>(payload) * sent_factor);
}

Work Communicator::all_reduce(at::Tensor& tensor, Reduce op, bool async) {
  const double n = size();
  trace::Range range(trace::names_wanted() ? trace::collective_name("all_reduce", tensor.nbytes()) : "");
  count("all_reduce", tensor.nbytes(), 2.0 * (n - 1) / n);
  Work w = do_all_reduce(tensor, op);
  if (!async) w.wait();
  return w;
}

void Communicator::broadcast(at::Tensor& tensor, int root) {
  trace::Range range(trace::names_wanted() ? trace::collective_name("broadcast", tensor.nbytes())
                                           : "");
  count("broadcast", tensor.nbytes(), size() > 1 ? 1.0 : 0.0);
  do_broadcast(tensor, root).wait();
}

Work Communicator::all_gather(at::Tensor& output, const at::Tensor& input, bool async) {
  if (output.numel() != input.numel() * size()) {
    throw std::invalid_argument("all_gather: output must hold world_size x input elements");
  }
  const double n = size();
  trace::Range range(trace::names_wanted() ? trace::collective_name("all_gather", output.nbytes()) : "");
  count("all_gather", output.nbytes(), (n - 1) / n);
  Work w = do_all_gather(output, input);
  if (!async) w.wait();
  return w;
}

double all_reduce_scalar(Communicator& comm, double v, Reduce op) {
  at::Tensor t = at::full({1}, v, at::TensorOptions(comm.device()).dtype(at::kDouble));
  comm.all_reduce(t, op);
  return t.item<double>();
}

Work Communicator::reduce_scatter(at::Tensor& output, const at::Tensor& input, bool async) {
  if (input.numel() != output.numel() * size()) {
    throw std::invalid_argument("reduce_scatter: input must hold world_size x output elements");
  }
  const double n = size();
  trace::Range range(trace::names_wanted() ? trace::collective_name("reduce_scatter", input.nbytes()) : "");
  count("reduce_scatter", input.nbytes(), (n - 1) / n);
  Work w = do_reduce_scatter(output, input);
  if (!async) w.wait();
  return w;
}

void Communicator::barrier() {
  trace::Range range("barrier");
  do_barrier().wait();
}

namespace detail {

C10dGroup::C10dGroup(RankInfo info, c10::Device device, c10::intrusive_ptr<c10d::Backend> backend,
                     std::chrono::milliseconds timeout)
    : Communicator(std::move(info), device),
      backend_(std::move(backend)),
      name_(backend_->getBackendName()),
      timeout_(timeout) {}

Work C10dGroup::wrap(c10::intrusive_ptr<c10d::Work> work, const char* op) {
  return Work([work = std::move(work), op, this] {
    // Time blocked here is the step's communication wait (taken out of the enclosing phase).
    trace::Range waiting(trace::names_wanted() ? fmt::format("wait {}", op) : "",
                         trace::Phase::comm_wait);
    try {
      work->wait(timeout_);
    } catch (const std::exception& e) {
      throw Error(fmt::format(
          "distributed: {} on rank {} of {} failed or did not finish within {} s "
          "(distributed.timeout_s); another rank has probably died or is stuck. {}: {}",
          op, rank(), size(), timeout_.count() / 1000.0, name_, e.what()));
    }
  });
}

Work C10dGroup::do_all_reduce(at::Tensor& tensor, Reduce op) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions o;
  o.reduceOp = op == Reduce::kSum ? c10d::ReduceOp::SUM : c10d::ReduceOp::MAX;
  return wrap(backend_->allreduce(tensors, o), "all_reduce");
}

Work C10dGroup::do_broadcast(at::Tensor& tensor, int root) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  return wrap(backend_->broadcast(tensors, o), "broadcast");
}

Work C10dGroup::do_all_gather(at::Tensor& output, const at::Tensor& input) {
  at::Tensor in = input;
  return wrap(backend_->_allgather_base(output, in), "all_gather");
}

Work C10dGroup::do_reduce_scatter(at::Tensor& output, const at::Tensor& input) {
  at::Tensor in = input;
  return wrap(backend_->_reduce_scatter_base(output, in), "reduce_scatter");
}

Work C10dGroup::do_barrier() { return wrap(backend_->barrier(), "barrier"); }

}  // namespace detail

std::string resolve_backend(const std::string& backend) {
  if (backend != "auto") return backend;
  return at::globalContext().hasCUDA() ? "nccl" : "gloo";
}

void broadcast_module(Communicator& comm, torch::nn::Module& module, int root) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.named_parameters(/*recurse=*/true)) {
    at::Tensor t = p.value().detach();
    comm.broadcast(t, root);
  }
  for (auto& b : module.named_buffers(/*recurse=*/true)) {
    at::Tensor t = b.value();
    comm.broadcast(t, root);
  }
}

std::shared_ptr<Communicator> init_from_env(const DistributedConfig& cfg, const RankInfo& info) {
  const std::string backend = resolve_backend(cfg.backend);
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(cfg.timeout_s * 1000.0));
  if (backend == "nccl" && !at::globalContext().hasCUDA()) {
    throw Error("distributed.backend: nccl needs CUDA, and this process sees no CUDA device "
                "(use gloo or auto)");
  }
  c10::intrusive_ptr<c10d::Store> store;
  if (info.world_size == 1) {
    store = c10::make_intrusive<c10d::HashStore>();  // a group of one: nothing to meet
  } else {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<uint16_t>(info.master_port);
    opts.isServer = info.rank == 0 && !info.agent_store;
    opts.numWorkers = info.agent_store ? std::nullopt : std::optional<size_t>(info.world_size);
    opts.waitWorkers = !info.agent_store;
    opts.timeout = timeout;
    if (opts.isServer) {
      bool numeric = false;
      opts.masterListenFd = detail::listen_for_store(info.master_addr, info.master_port, numeric);
      if (!opts.masterListenFd && numeric) {
        log::warn(fmt::format("distributed: MASTER_ADDR {} is not an address of this machine; the "
                              "store listens on port {} of every interface",
                              info.master_addr, info.master_port));
      }
    }
    try {
      store = c10::make_intrusive<c10d::TCPStore>(info.master_addr, opts);
    } catch (const std::exception& e) {
      throw Error(fmt::format(
          "distributed: rank {} could not meet the others at {}:{} ({}) within {} s: {}",
          info.rank, info.master_addr, info.master_port,
          opts.isServer ? "serving the store" : "as a client", cfg.timeout_s, e.what()));
    }
    // Restarts of the same job must not read the previous attempt's keys.
    store = c10::make_intrusive<c10d::PrefixStore>(
        fmt::format("frugal/attempt_{}", info.restart_count), store);
  }
  if (backend == "nccl") {
    auto pg = detail::make_nccl_backend(store, info, timeout);
    return std::make_shared<detail::C10dGroup>(
        info, c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(info.local_rank)), pg,
        timeout);
  }
  auto pg = detail::make_gloo_backend(store, info, timeout);
  return std::make_shared<detail::C10dGroup>(info, c10::Device(c10::kCPU), pg, timeout);
}

std::shared_ptr<Communicator> init_from_env(const DistributedConfig& cfg) {
  return init_from_env(cfg, rank_info_from_env());
}

}  // namespace frugal::dist
