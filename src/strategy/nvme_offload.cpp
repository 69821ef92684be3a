#include "frugal/strategy/nvme_offload.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/utils.h>

#include <c10/util/accumulate.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <system_error>

#include "frugal/io/direct_io.h"
#include "frugal/io/record_stream.h"
#include "frugal/optim/param_state.h"
#include "frugal/strategy/offload_stream.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "frugal/util/trace.h"
#include "io/file_runs_map.h"

namespace frugal {
namespace {

constexpr const char* kKey = "strategy.offload.nvme_path";

int64_t aligned64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

int64_t nbytes(const std::vector<int64_t>& sizes, at::ScalarType dtype) {
  int64_t n = 1;
  for (int64_t d : sizes) n *= d;
  return n * static_cast<int64_t>(c10::elementSize(dtype));
}

// Points `t` (keeping the object the optimizer holds) at `bytes`, with its own shape and dtype;
// the memory is not owned: the caller keeps it alive while `t` uses it.
void point_at(at::Tensor& t, std::byte* bytes, const std::vector<int64_t>& sizes,
              at::ScalarType dtype) {
  t.set_(at::from_blob(bytes, sizes, at::TensorOptions().dtype(dtype)));
}

// A scratch file under `dir` for this process, without a name (see the header).
std::unique_ptr<io::DirectFile> open_scratch(const std::filesystem::path& dir, bool require_direct) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw Error(fmt::format("{}: '{}' is not a directory (create it on a fast local disk)", kKey,
                            dir.string()));
  }
  std::unique_ptr<io::DirectFile> file;
  try {
    file = std::make_unique<io::DirectFile>(
        io::DirectFile::unnamed(dir, "frugal-optimizer-state", require_direct));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", kKey, e.what()));
  }
  if (!file->direct()) {
    log::warn(fmt::format("{}: '{}' refuses O_DIRECT: the optimizer state goes through the page "
                          "cache (slower, and it competes with training for host memory; "
                          "strategy.offload.nvme_require_direct makes this an error)",
                          kKey, dir.string()));
  }
  return file;
}

}  // namespace

NvmeOptimizerOffload::NvmeOptimizerOffload(torch::optim::Optimizer& optimizer,
                                           const NvmeOffloadOptions& options)
    : options_(options) {
  if (!optimizer.state().empty()) {
    throw Error("strategy.offload.optimizer: set up before the optimizer's first step");
  }
  file_ = open_scratch(options.dir, options.require_direct);
  engine_ = std::make_unique<io::IoEngine>(8);
  torch::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      const at::ScalarType dtype = master_dtype(p.scalar_type());
      at::Tensor master = at::empty({0}, at::TensorOptions().dtype(dtype));
      master.requires_grad_(p.requires_grad());
      index_[p.unsafeGetTensorImpl()] = pairs_.size();
      master_index_[master.unsafeGetTensorImpl()] = pairs_.size();
      pairs_.push_back({p, master, p.sizes().vec(), dtype});
      p = master;  // the optimizer now steps the master
    }
  }
}

NvmeOptimizerOffload::~NvmeOptimizerOffload() = default;

at::Tensor NvmeOptimizerOffload::device_part(const Entry& entry) const {
  const Pair& pair = pairs_[entry.pair];
  if (pair.piece == 0) return pair.device;
  return pair.device.view(-1).slice(0, entry.begin, entry.begin + entry.count);
}

void NvmeOptimizerOffload::take_gradients(const std::vector<const Entry*>& entries) {
  int64_t at = 0;
  for (const Entry* entry : entries) {
    Pair& pair = pairs_[entry->pair];
    const at::Tensor& g = pair.device.grad();
    if (!pair.master.requires_grad() || !g.defined()) {
      pair.master.mutable_grad() = at::Tensor();
      continue;
    }
    at::Tensor host = at::from_blob(grad_scratch_.data_ptr<uint8_t>() + at, pair.master.sizes(),
                                    at::TensorOptions().dtype(pair.dtype));
    host.copy_(pair.piece == 0 ? g : g.view(-1).slice(0, entry->begin, entry->begin + entry->count));
    pair.master.mutable_grad() = host;
    at += aligned64(static_cast<int64_t>(host.nbytes()));
  }
}

void NvmeOptimizerOffload::step_entries(torch::optim::Optimizer& optimizer,
                                        const std::vector<const Entry*>& entries) {
  if (entries.empty()) return;
  take_gradients(entries);
  std::unordered_map<const c10::TensorImpl*, size_t> chosen;
  for (const Entry* entry : entries) {
    const Pair& pair = pairs_[entry->pair];
    chosen[pair.master.unsafeGetTensorImpl()] = entry->pair;
    // A piece: the count as it was before this step, so that each piece advances it by one.
    if (pair.piece > 0 && steps_[entry->pair] >= 0) {
      set_param_state_step(optimizer, pair.master, steps_[entry->pair]);
    }
  }
  step_only(optimizer, [&](const at::Tensor& m) { return chosen.count(m.unsafeGetTensorImpl()) != 0; });
  for (const Entry* entry : entries) {
    Pair& pair = pairs_[entry->pair];
    device_part(*entry).copy_(pair.master.view(device_part(*entry).sizes()));
    pair.master.mutable_grad() = at::Tensor();
  }
}

void NvmeOptimizerOffload::step(torch::optim::Optimizer& optimizer) {
  torch::NoGradGuard no_grad;
  // The step writes the file: an asynchronous checkpoint reading the state through its
  // mappings finishes first, and no tensor of the optimizer's may still map it (nor keep pages
  // the writes would have to invalidate).
  if (held_.valid()) {
    held_.wait();
    held_ = {};
  }
  if (state_mapped_) {
    for (Entry& entry : entries_) {
      for (Placed& p : entry.tensors) p.tensor.set_();
    }
    state_mapped_ = false;
    mapped_.clear();
  }
  if (entries_.empty()) {
    lay_out_step(optimizer);
  } else {
    stream_step(optimizer);
  }
  state_in_memory_ = false;
}

void NvmeOptimizerOffload::note_steps(torch::optim::Optimizer& optimizer) {
  steps_.assign(pairs_.size(), -1);
  for (size_t i = 0; i < pairs_.size(); ++i) {
    if (pairs_[i].piece > 0) steps_[i] = param_state_step(optimizer, pairs_[i].master);
  }
}

void NvmeOptimizerOffload::lay_out_pair(torch::optim::Optimizer& optimizer, size_t i,
                                        int64_t& file_end) {
  Pair& pair = pairs_[i];
  const int64_t numel = c10::multiply_integers(pair.sizes);
  const auto master_key = pair.master.unsafeGetTensorImpl();
  // A large parameter's state loaded whole (a resume): kept aside and cut piece by piece.
  std::map<std::string, at::Tensor> whole;
  const bool had_state = optimizer.state().count(master_key) != 0;
  if (pair.piece > 0 && had_state) {
    for (const auto& [kind, t] : param_state_tensors(optimizer, pair.master)) {
      if (kind == "step") continue;
      at::Tensor alias = at::empty({0}, t.options());
      alias.set_(t);  // shares the storage; the optimizer's tensor is re-pointed below
      whole[kind] = alias;
    }
  }
  const size_t first_entry = entries_.size();
  for (int64_t begin = 0; begin < std::max<int64_t>(numel, 1);) {
    Entry entry;
    entry.pair = i;
    entry.begin = begin;
    entry.count = pair.piece > 0 ? std::min(pair.piece, numel - begin) : numel;
    entry.offset = file_end;
    begin += std::max<int64_t>(entry.count, 1);
    const std::vector<int64_t> sizes =
        pair.piece > 0 ? std::vector<int64_t>{entry.count} : pair.sizes;
    pair.master.set_(at::empty(sizes, at::TensorOptions().dtype(pair.dtype)));
    pair.master.copy_(device_part(entry).view(sizes));
    if (pair.piece > 0) {
      if (had_state) {
        for (const auto& [kind, t] : param_state_tensors(optimizer, pair.master)) {
          if (kind == "step") continue;
          at::Tensor cut = whole.at(kind).reshape(-1).slice(0, entry.begin, entry.begin + entry.count);
          at::Tensor(t).set_(cut.clone());
        }
      } else if (entry.begin > 0) {
        optimizer.state().erase(master_key);  // each new piece starts its state afresh
      }
    }
    step_entries(optimizer, {&entry});
    int64_t at = 0;
    auto place = [&](const at::Tensor& t) {
      if (!t.is_contiguous() || !t.device().is_cpu()) {
        throw Error("strategy.offload.optimizer nvme: the optimizer keeps a state tensor that is "
                    "not contiguous host memory");
      }
      entry.tensors.push_back({t, at, t.sizes().vec(), t.scalar_type()});
      // A piece's tensors start on a page: bring_state_in maps the pieces of each one side by
      // side into a whole tensor.
      const auto bytes = static_cast<int64_t>(t.nbytes());
      at += pair.piece > 0 ? io::map_aligned(bytes) : aligned64(bytes);
    };
    place(pair.master);
    // "step" is a count the optimizer's state object keeps itself (returned as a new tensor).
    for (const auto& [kind, t] : param_state_tensors(optimizer, pair.master)) {
      if (kind != "step" && t.defined()) place(t);
    }
    // Whole pages (at least the direct-I/O block): an entry is mapped on its own for a save.
    entry.bytes = io::map_aligned(std::max<int64_t>(at, 1));
    io::AlignedBuffer staging(entry.bytes);
    for (const Placed& p : entry.tensors) {
      std::memcpy(staging.data() + p.at, p.tensor.data_ptr(), p.tensor.nbytes());
    }
    engine_->wait(engine_->write(*file_, staging.data(), entry.bytes, entry.offset));
    file_end += entry.bytes;
    for (Placed& p : entry.tensors) p.tensor.set_();  // the file holds it now
    entries_.push_back(std::move(entry));
  }
  // The pieces' entries all stand for the optimizer's state object as it is now (a fresh piece
  // replaced the object before it).
  if (pair.piece > 0) {
    std::vector<at::Tensor> now = {pair.master};
    for (const auto& [kind, t] : param_state_tensors(optimizer, pair.master)) {
      if (kind != "step" && t.defined()) now.push_back(t);
    }
    for (size_t e = first_entry; e < entries_.size(); ++e) {
      if (entries_[e].tensors.size() != now.size()) {
        throw Error("strategy.offload.optimizer nvme: the optimizer's state differs between the "
                    "pieces of one parameter");
      }
      for (size_t k = 0; k < now.size(); ++k) entries_[e].tensors[k].tensor = now[k];
    }
    for (at::Tensor& t : now) t.set_();
  }
}

void NvmeOptimizerOffload::lay_out_step(torch::optim::Optimizer& optimizer) {
  trace::Range phase("offload/nvme_lay_out");
  entries_.clear();
  records_.clear();
  stream_.reset();
  // A ring slot is a third of the buffers; a parameter whose master and up to three state
  // tensors of its size would not fit one goes in pieces (element-wise state only).
  const int64_t slot = std::max<int64_t>(options_.buffer_bytes / 3, io::kDirectAlignment);
  const bool can_cut = elementwise_state(optimizer);
  int64_t largest_grads = 0;
  for (Pair& pair : pairs_) {
    const int64_t numel = c10::multiply_integers(pair.sizes);
    const int64_t element = static_cast<int64_t>(c10::elementSize(pair.dtype));
    // Pieces of whole pages, so that each piece's tensors map page by page (bring_state_in).
    const int64_t unit = io::map_granularity() / element;
    const int64_t fits = std::max<int64_t>(unit, slot / (4 * element) / unit * unit);
    pair.piece = can_cut && pair.device.is_contiguous() && numel > fits ? fits : 0;
    largest_grads = std::max(largest_grads, aligned64((pair.piece > 0 ? pair.piece : numel) * element));
  }
  grad_scratch_ = host_bytes(largest_grads);
  note_steps(optimizer);
  // One entry at a time: its master from the device, its step (creating its state), then the
  // entry written and its host memory freed.
  int64_t file_end = 0;
  for (size_t i = 0; i < pairs_.size(); ++i) lay_out_pair(optimizer, i, file_end);
  // Records: runs of entries of at most a slot each (a larger entry alone).
  std::vector<int64_t> record_bytes;
  for (size_t e = 0; e < entries_.size(); ++e) {
    if (records_.empty() || record_bytes.back() + entries_[e].bytes > slot) {
      records_.push_back({e, e, entries_[e].offset});
      record_bytes.push_back(0);
    }
    records_.back().last = e + 1;
    record_bytes.back() += entries_[e].bytes;
  }
  int64_t largest_record_grads = 0;
  for (const Record& r : records_) {
    int64_t g = 0;
    for (size_t e = r.first; e < r.last; ++e) {
      const Pair& pair = pairs_[entries_[e].pair];
      g += aligned64(entries_[e].count * static_cast<int64_t>(c10::elementSize(pair.dtype)));
    }
    largest_record_grads = std::max(largest_record_grads, g);
  }
  grad_scratch_ = host_bytes(largest_record_grads);
  io::HostAllocate ring_memory;
  if (on_cuda()) {
    ring_memory = [](int64_t bytes) {
      auto t = std::make_shared<at::Tensor>(offload_stream::page_locked_bytes(bytes));
      frugal::io::HostBlock block;
      block.data = reinterpret_cast<std::byte*>(t->data_ptr());
      block.owner = std::move(t);
      return block;
    };
  }
  if (!record_bytes.empty()) stream_ = std::make_unique<io::RecordStream>(record_bytes, 3, ring_memory);
  log::info(fmt::format("offload.optimizer nvme: {:.1f} MiB of masters and optimizer state on "
                        "disk ({}, {}), {} records per step through {:.1f} MiB of {}host buffers",
                        static_cast<double>(file_bytes()) / (1 << 20), backend(),
                        direct() ? "O_DIRECT" : "cached", records_.size(),
                        static_cast<double>(host_buffer_bytes()) / (1 << 20),
                        on_cuda() ? "page-locked " : ""));
}

void NvmeOptimizerOffload::stream_step(torch::optim::Optimizer& optimizer) {
  trace::Range phase("offload/nvme_step");
  note_steps(optimizer);
  stream_->for_each(*engine_, *file_, [&](size_t r, std::byte* data, int64_t) {
    const Record& record = records_[r];
    auto point = [&](Entry& entry) {
      for (Placed& p : entry.tensors) {
        point_at(p.tensor, data + (entry.offset - record.offset) + p.at, p.sizes, p.dtype);
      }
    };
    // Whole parameters in one optimizer call; each piece of a large one in its own (its
    // tensors are the same objects as its other pieces').
    std::vector<const Entry*> whole;
    for (size_t e = record.first; e < record.last; ++e) {
      Entry& entry = entries_[e];
      point(entry);
      if (pairs_[entry.pair].piece == 0) {
        whole.push_back(&entry);
      } else {
        step_entries(optimizer, {&entry});
      }
    }
    step_entries(optimizer, whole);
    // The ring slot is reused for another record: nothing may keep pointing into it.
    for (size_t e = record.first; e < record.last; ++e) {
      for (Placed& p : entries_[e].tensors) p.tensor.set_();
    }
  });
}

void NvmeOptimizerOffload::bring_state_in() {
  if (state_in_memory_) return;
  torch::NoGradGuard no_grad;
  state_in_memory_ = true;
  if (entries_.empty()) {
    // Not laid out yet: the state (if any) is the optimizer's in host memory already; the
    // masters take their shapes and values from the device (what a load expects of them).
    for (Pair& pair : pairs_) {
      pair.master.set_(at::empty(pair.sizes, at::TensorOptions().dtype(pair.dtype)));
      pair.master.copy_(pair.device);
    }
    return;
  }
  // The tensors map the file (copy-on-write): a checkpoint's writer reads them through the
  // page cache one at a time, and the process holds no copy of the state. An entry maps on
  // its own; a parameter in pieces has each tensor put together whole, in the parameter's
  // shape (as RAM offload keeps it, and as a checkpoint stores it), from its pieces' pages.
  state_mapped_ = true;
  const int fd = file_->fd();
  struct Pieces {
    Entry* first = nullptr;
    std::vector<std::vector<io::FileRun>> runs;  // per tensor of the entry
  };
  std::map<size_t, Pieces> pieced;
  for (Entry& entry : entries_) {
    const Pair& pair = pairs_[entry.pair];
    if (pair.piece == 0) {
      const auto map = io::FileRunsMap::map(fd, {{entry.offset, entry.bytes}});
      for (Placed& p : entry.tensors) p.tensor.set_(io::tensor_over(map, p.at, p.sizes, p.dtype));
      continue;
    }
    Pieces& pieces = pieced[entry.pair];
    if (pieces.first == nullptr) pieces.first = &entry;
    pieces.runs.resize(entry.tensors.size());
    for (size_t k = 0; k < entry.tensors.size(); ++k) {
      const Placed& p = entry.tensors[k];
      pieces.runs[k].push_back(
          {entry.offset + p.at, entry.count * static_cast<int64_t>(c10::elementSize(p.dtype))});
    }
  }
  for (auto& [pair, pieces] : pieced) {
    for (size_t k = 0; k < pieces.runs.size(); ++k) {
      Placed& p = pieces.first->tensors[k];
      p.tensor.set_(io::tensor_over(io::FileRunsMap::map(fd, pieces.runs[k]), 0,
                                    pairs_[pair].sizes, p.dtype));
    }
  }
  for (const Entry& entry : entries_) {
    for (const Placed& p : entry.tensors) {
      if (p.tensor.numel() > 0) mapped_.insert(p.tensor.storage().data());
    }
  }
}

bool NvmeOptimizerOffload::on_cuda() const {
  return !pairs_.empty() && pairs_.front().device.is_cuda();
}

at::Tensor NvmeOptimizerOffload::host_bytes(int64_t bytes) const {
  return on_cuda() ? offload_stream::page_locked_bytes(bytes) : at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
}

bool NvmeOptimizerOffload::kept_until_step(const at::Tensor& t) const {
  return state_mapped_ && t.defined() && t.has_storage() && mapped_.count(t.storage().data()) != 0;
}

void NvmeOptimizerOffload::hold_state_until(std::shared_future<void> written) {
  held_ = std::move(written);
}

void NvmeOptimizerOffload::reload_from_device() {
  // The state stays the optimizer's (a load replaced it, or it maps the file); the next step
  // takes the masters from the device and lays the state out again, in a new scratch file if
  // the state maps the old one (which is read as the new one is written, and goes with the
  // last tensor mapping it).
  bring_state_in();
  torch::NoGradGuard no_grad;
  if (state_mapped_) file_ = open_scratch(options_.dir, options_.require_direct);
  for (Pair& pair : pairs_) pair.master.set_();  // as between steps: the device holds them
  entries_.clear();
  records_.clear();
  stream_.reset();
  state_in_memory_ = false;
  state_mapped_ = false;
  mapped_.clear();
}

void NvmeOptimizerOffload::zero_device_grads(bool set_to_none) {
  for (Pair& pair : pairs_) clear_device_grad(pair.device, set_to_none);
}

at::Tensor NvmeOptimizerOffload::master_of(const at::Tensor& p) const {
  if (auto it = index_.find(p.unsafeGetTensorImpl()); it != index_.end()) {
    return pairs_[it->second].master;
  }
  if (auto it = master_index_.find(p.unsafeGetTensorImpl()); it != master_index_.end()) {
    return pairs_[it->second].master.numel() == 0 ? pairs_[it->second].device : p;
  }
  return p;
}

int64_t NvmeOptimizerOffload::file_bytes() const {
  return entries_.empty() ? 0 : entries_.back().offset + entries_.back().bytes;
}

int64_t NvmeOptimizerOffload::host_buffer_bytes() const {
  return (stream_ ? stream_->buffer_bytes() : 0) +
         (grad_scratch_.defined() ? static_cast<int64_t>(grad_scratch_.nbytes()) : 0);
}

bool NvmeOptimizerOffload::direct() const { return file_->direct(); }

const char* NvmeOptimizerOffload::backend() const { return io::backend_name(engine_->backend()); }

}  // namespace frugal
