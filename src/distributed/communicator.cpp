#include "frugal/distributed/communicator.h"

#include <ATen/Context.h>
#include <ATen/ops/full.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "c10d_group.h"
#include "distributed/rank_faults.h"
#include "job_agreement.h"
#include "store_socket.h"
#include "frugal/io/atomic_file.h"
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

Communicator::Communicator(RankInfo info, c10::Device device)
    : info_(std::move(info)), device_(device), skip_seq_(detail::collective_to_skip(info_.rank)) {}

void Communicator::count(const std::string& op, int64_t payload, double sent_factor) {
  Traffic& t = traffic_[op];
  ++t.calls;
  t.payload_bytes += payload;
  t.sent_bytes += static_cast<int64_t>(static_cast<double>(payload) * sent_factor);
}

namespace {

// distributed.debug's fingerprint of a collective: sequence number, op, dtype, size and the
// first bytes of its tag, as int64s every rank gathers.
constexpr int kTagWords = 6;
constexpr int kPrintWords = 4 + kTagWords;
const char* const kOps[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"};

std::string op_name(int64_t code) {
  return code >= 0 && code < 5 ? kOps[code] : fmt::format("op {}", code);
}

// A c10d failure in one line: a c10::Error's what() carries the C++ backtrace where it was
// raised (a dozen lines), and frugal's errors are one line, which `frugal launch` repeats as
// a failed rank's last words.
std::string c10d_failure_text(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  const std::string text = c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
  return first_line(text);
}

}  // namespace

void Communicator::check_same_collective(const char* op, const at::Tensor* tensor,
                                         std::string_view tag) {
  std::vector<int64_t> mine(kPrintWords, 0);
  mine[0] = recorder_.next_seq();
  mine[1] = std::find_if(std::begin(kOps), std::end(kOps),
                         [&](const char* o) { return std::string_view(o) == op; }) -
            std::begin(kOps);
  mine[2] = tensor != nullptr ? static_cast<int64_t>(tensor->scalar_type()) : -1;
  mine[3] = tensor != nullptr ? tensor->numel() : 0;
  std::memcpy(mine.data() + 4, tag.data(), std::min(tag.size(), sizeof(int64_t) * kTagWords));
  at::Tensor local = at::from_blob(mine.data(), {kPrintWords}, at::kLong).to(device_);
  at::Tensor all = at::empty({kPrintWords * size()}, local.options());
  do_all_gather(all, local).wait();
  const at::Tensor cpu = all.cpu();
  const int64_t* got = cpu.data_ptr<int64_t>();
  auto side = [&](int r) {
    const int64_t* w = got + static_cast<ptrdiff_t>(r) * kPrintWords;
    char text[sizeof(int64_t) * kTagWords + 1] = {};
    std::memcpy(text, w + 4, sizeof(int64_t) * kTagWords);
    std::string d = fmt::format("rank {}: #{} {}", r, w[0], op_name(w[1]));
    if (w[2] >= 0) {
      d += fmt::format(" {} x{}", c10::toString(static_cast<c10::ScalarType>(w[2])), w[3]);
    }
    if (text[0] != '\0') d += fmt::format(" [{}]", text);
    return d;
  };
  for (int r = 0; r < size(); ++r) {
    if (std::equal(got + static_cast<ptrdiff_t>(r) * kPrintWords,
                   got + static_cast<ptrdiff_t>(r + 1) * kPrintWords, mine.begin())) {
      continue;
    }
    throw Error(fmt::format(
        "distributed.debug: the ranks are about to run different collectives ({}; {}): one of "
        "them took another path through the step",
        side(rank()), side(r)));
  }
}

std::string Communicator::dump_flight_recorder(const std::string& why, double wait_s) {
  if (dump_dir_.empty()) return "";
  std::error_code ec;
  std::filesystem::create_directories(dump_dir_, ec);
  try {
    io::write_file_atomic(dump_dir_ / fmt::format("rank_{}.json", rank()),
                          recorder_.to_json(rank(), size(), why));
  } catch (const std::exception&) {
  }
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000));
  for (;;) {
    int present = 0;
    for (int r = 0; r < size(); ++r) {
      present += std::filesystem::exists(dump_dir_ / fmt::format("rank_{}.json", r), ec);
    }
    if (present == size() || std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return flight_recorder_verdict(dump_dir_, size(), wait_s);
}

void Communicator::fail_with_dump(const std::string& message) {
  if (dump_dir_.empty()) {
    const auto recs = recorder_.records();
    throw Error(fmt::format("{} (this rank's collective: {})", message,
                            recs.empty() ? std::string("none") : describe(recs.back())));
  }
  // The other ranks see the same failure within moments (a peer's closed connection, or the
  // same timeout): their dumps are waited for briefly, to compare.
  throw Error(fmt::format("{}; {}", message, dump_flight_recorder(message, 3.0)));
}

Work Communicator::recorded(const char* op, const at::Tensor* tensor, std::string_view tag,
                            const std::function<Work()>& issue) {
  if (skip_seq_ >= 0 && recorder_.next_seq() == skip_seq_) {
    skip_seq_ = -1;
    log::warn(fmt::format("FRUGAL_FAULT_SKIP_COLLECTIVE: rank {} skips its collective #{} ({})",
                          rank(), recorder_.next_seq(), op));
    return Work();
  }
  if (debug_ && size() > 1) {
    try {
      check_same_collective(op, tensor, tag);
    } catch (const Error& e) {
      // Both sides are named already; the dump keeps what led up to it.
      (void)dump_flight_recorder(e.what(), 0.0);
      throw Error(dump_dir_.empty() ? std::string(e.what())
                                    : fmt::format("{} (dumps in '{}')", e.what(),
                                                  dump_dir_.string()));
    }
  }
  const int64_t seq =
      recorder_.begin(op, tensor != nullptr ? c10::toString(tensor->scalar_type()) : "",
                      tensor != nullptr ? tensor->numel() : 0, tag);
  Work inner;
  try {
    inner = issue();
  } catch (const Error& e) {
    recorder_.finish(seq, false);
    fail_with_dump(e.what());
  }
  return Work([this, seq, inner]() mutable {
    try {
      inner.wait();
    } catch (const Error& e) {
      recorder_.finish(seq, false);
      fail_with_dump(e.what());
    }
    recorder_.finish(seq, true);
  });
}

Work Communicator::all_reduce(at::Tensor& tensor, Reduce op, bool async, std::string_view tag) {
  const double n = size();
  trace::Range range(trace::names_wanted() ? trace::collective_name("all_reduce", tensor.nbytes()) : "");
  count("all_reduce", tensor.nbytes(), 2.0 * (n - 1) / n);
  Work w = recorded("all_reduce", &tensor, tag, [&] { return do_all_reduce(tensor, op); });
  if (!async) w.wait();
  return w;
}

void Communicator::broadcast(at::Tensor& tensor, int root, std::string_view tag) {
  trace::Range range(trace::names_wanted() ? trace::collective_name("broadcast", tensor.nbytes())
                                           : "");
  count("broadcast", tensor.nbytes(), size() > 1 ? 1.0 : 0.0);
  recorded("broadcast", &tensor, tag, [&] { return do_broadcast(tensor, root); }).wait();
}

Work Communicator::all_gather(at::Tensor& output, const at::Tensor& input, bool async,
                              std::string_view tag) {
  if (output.numel() != input.numel() * size()) {
    throw std::invalid_argument("all_gather: output must hold world_size x input elements");
  }
  const double n = size();
  trace::Range range(trace::names_wanted() ? trace::collective_name("all_gather", output.nbytes()) : "");
  count("all_gather", output.nbytes(), (n - 1) / n);
  Work w = recorded("all_gather", &input, tag, [&] { return do_all_gather(output, input); });
  if (!async) w.wait();
  return w;
}

double all_reduce_scalar(Communicator& comm, double v, Reduce op) {
  at::Tensor t = at::full({1}, v, at::TensorOptions(comm.device()).dtype(at::kDouble));
  comm.all_reduce(t, op);
  return t.item<double>();
}

Work Communicator::reduce_scatter(at::Tensor& output, const at::Tensor& input, bool async,
                                  std::string_view tag) {
  if (input.numel() != output.numel() * size()) {
    throw std::invalid_argument("reduce_scatter: input must hold world_size x output elements");
  }
  const double n = size();
  trace::Range range(trace::names_wanted() ? trace::collective_name("reduce_scatter", input.nbytes()) : "");
  count("reduce_scatter", input.nbytes(), (n - 1) / n);
  Work w = recorded("reduce_scatter", &input, tag,
                    [&] { return do_reduce_scatter(output, input); });
  if (!async) w.wait();
  return w;
}

std::shared_ptr<Communicator> Communicator::subgroup(const std::string& name,
                                                   const std::vector<int>& members) {
  const auto at = std::find(members.begin(), members.end(), rank());
  if (at == members.end()) {
    throw Error(fmt::format("distributed: rank {} asked for group '{}' of ranks {}, which it is "
                            "not in",
                            rank(), name, fmt::join(members, ",")));
  }
  RankInfo group = info_;
  group.rank = static_cast<int>(at - members.begin());
  group.world_size = static_cast<int>(members.size());
  // The n-th group of this name (its members ask for them in the same order): its own keys in
  // the store, so that a group made again does not meet the last one's stale addresses.
  return do_subgroup(fmt::format("{}/{}", name, groups_made_[name]++), group);
}

void Communicator::barrier() {
  trace::Range range("barrier");
  recorded("barrier", nullptr, {}, [&] { return do_barrier(); }).wait();
}

namespace detail {

C10dGroup::C10dGroup(RankInfo info, c10::Device device, c10::intrusive_ptr<c10d::Backend> backend,
                     std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Store> store)
    : Communicator(std::move(info), device),
      backend_(std::move(backend)),
      name_(backend_->getBackendName()),
      timeout_(timeout),
      store_(std::move(store)) {}

std::shared_ptr<Communicator> C10dGroup::do_subgroup(const std::string& name, RankInfo info) {
  auto store = c10::make_intrusive<c10d::PrefixStore>("group/" + name, store_);
  auto group = make_group(name_, info, store, timeout_);
  group->set_debug(debug_enabled());
  return group;
}

std::shared_ptr<Communicator> make_group(const std::string& backend, const RankInfo& info,
                                         const c10::intrusive_ptr<c10d::Store>& store,
                                         std::chrono::milliseconds timeout) {
  if (backend == "nccl") {
    auto pg = make_nccl_backend(store, info, timeout);
    return std::make_shared<C10dGroup>(
        info, c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(info.local_rank)), pg,
        timeout, store);
  }
  auto pg = make_gloo_backend(store, info, timeout);
  return std::make_shared<C10dGroup>(info, c10::Device(c10::kCPU), pg, timeout, store);
}

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
          op, rank(), size(), timeout_.count() / 1000.0, name_, c10d_failure_text(e)));
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
          opts.isServer ? "serving the store" : "as a client", cfg.timeout_s,
          c10d_failure_text(e)));
    }
    // Restarts of the same job must not read the previous attempt's keys.
    store = c10::make_intrusive<c10d::PrefixStore>(
        fmt::format("frugal/attempt_{}", info.restart_count), store);
    detail::agree_on_job(*store, info, timeout);
  }
  std::shared_ptr<Communicator> comm = detail::make_group(backend, info, store, timeout);
  comm->set_debug(cfg.debug);
  return comm;
}

std::shared_ptr<Communicator> init_from_env(const DistributedConfig& cfg) {
  return init_from_env(cfg, rank_info_from_env());
}

}  // namespace frugal::dist
