#include "tensor_file.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/file_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cstring>
#include <unordered_map>

#include "archive_seal.h"
#include "cpu_tensor.h"
#include "fd.h"
#include "frugal/io/hash.h"
#include "frugal/util/error.h"
#include "safetensors_dtype.h"
#include "save_faults.h"

namespace frugal::io::detail {
namespace {

// The file as torch's zip writer streams it: every byte goes to the file (through the fault
// hooks) and into the whole-file and block hashes, except the last end-record's worth, held back
// until the end because the seal changes it. The first failed write stops the writing; error()
// says why.
class HashingSink {
 public:
  HashingSink(int fd, int64_t block_bytes) : fd_(fd), block_bytes_(block_bytes) {}

  size_t write(const void* data, size_t n) {
    std::string_view in(static_cast<const char*>(data), n);
    if (in.size() >= kSealEndRecordSize) {
      emit(held_);
      emit(in.substr(0, in.size() - kSealEndRecordSize));
      held_.assign(in.substr(in.size() - kSealEndRecordSize));
    } else {
      held_.append(in);
      if (held_.size() > kSealEndRecordSize) {
        const size_t out = held_.size() - kSealEndRecordSize;
        emit(std::string_view(held_).substr(0, out));
        held_.erase(0, out);
      }
    }
    // Always all of it: a short write makes torch's writer throw, and throw again from its
    // destructor (std::terminate). After a failed write the rest is dropped, and the caller
    // asks error() once the archive is done.
    return n;
  }

  // The end record, sealed, and the seal's comment; then the last, short block.
  void finish() {
    seal_end_record(held_);
    emit(held_);
    emit(seal_comment(hash_));
    if (block_fill_ > 0) blocks_.push_back(hex64(block_hash_));
  }

  int error() const { return err_; }
  int64_t bytes() const { return written_; }
  std::string hash() const { return hex64(hash_); }
  std::vector<std::string>& blocks() { return blocks_; }

 private:
  void emit(std::string_view bytes) {
    if (bytes.empty() || err_ != 0) return;
    if ((err_ = write_checkpoint_bytes(fd_, bytes, write_all)) != 0) return;
    written_ += static_cast<int64_t>(bytes.size());
    while (!bytes.empty()) {
      const size_t take = std::min<size_t>(bytes.size(), block_bytes_ - block_fill_);
      fnv1a64_both(bytes.substr(0, take), hash_, block_hash_);
      block_fill_ += static_cast<int64_t>(take);
      bytes.remove_prefix(take);
      if (block_fill_ == block_bytes_) {
        blocks_.push_back(hex64(block_hash_));
        block_hash_ = kFnv1a64Offset;
        block_fill_ = 0;
      }
    }
  }

  int fd_;
  int64_t block_bytes_;
  int err_ = 0;
  std::string held_;
  int64_t written_ = 0;
  std::uint64_t hash_ = kFnv1a64Offset;
  std::uint64_t block_hash_ = kFnv1a64Offset;
  int64_t block_fill_ = 0;
  std::vector<std::string> blocks_;
};

// A tensor of `t`'s dtype and shape, contiguous, over a storage of the right size that holds no
// memory: what the pickle says of a tensor (its storage key, dtype, size, shape) without the
// tensor's bytes, which are written as their own record when their turn comes.
at::Tensor placeholder(const at::Tensor& t) {
  const int64_t nbytes = t.numel() * static_cast<int64_t>(t.element_size());
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes,
                       c10::DataPtr(nullptr, c10::Device(c10::kCPU)), /*allocator=*/nullptr,
                       /*resizable=*/false);
  return at::empty({0}, at::TensorOptions().dtype(t.scalar_type()))
      .set_(storage, 0, t.sizes(), c10::contiguous_strides(t.sizes()));
}

// The pickle save_tensors writes (tensor_io.cpp's format), tensor i's storage under key "i".
std::string payload_pickle(const NamedTensors& named, std::vector<at::Tensor>& placeholders) {
  std::unordered_map<const void*, size_t> key_of;
  c10::List<std::string> names;
  c10::Dict<std::string, at::Tensor> tensors;
  for (const auto& [name, t] : named) {
    placeholders.push_back(placeholder(t));
    key_of[placeholders.back().storage().unsafeGetStorageImpl()] = placeholders.size() - 1;
    names.push_back(name);
    tensors.insert(name, placeholders.back());
  }
  c10::impl::GenericDict payload(c10::StringType::get(), c10::AnyType::get());
  payload.insert(std::string("format"), std::string("frugal.tensors"));
  payload.insert(std::string("version"), int64_t{1});
  payload.insert(std::string("names"), names);
  payload.insert(std::string("tensors"), tensors);
  std::string pickle;
  torch::jit::Pickler pickler(
      [&](const char* data, size_t n) { pickle.append(data, n); }, /*tensor_table=*/nullptr,
      /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      [&](const at::Tensor& t) {
        return std::to_string(key_of.at(t.storage().unsafeGetStorageImpl()));
      },
      /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(payload));
  pickler.stop();
  return pickle;
}

}  // namespace

int64_t block_bytes_for(int64_t file_bytes) {
  int64_t block = kMinBlockBytes;
  while (block < (int64_t{1} << 30) && block * kBlocksPerFile < file_bytes) block *= 2;
  return block;
}

int64_t TensorFileEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

TensorFileSummary write_tensor_file(const std::filesystem::path& path, const NamedTensors& named,
                                    int64_t block_bytes) {
  // Checked before the pickle describes them (standalone_cpu checks again, at no cost).
  check_names(named);
  for (const auto& [name, t] : named) check_savable(t, name);
  if (block_bytes <= 0) {
    int64_t bytes = 0;
    for (const auto& [_, t] : named) bytes += static_cast<int64_t>(t.nbytes());
    block_bytes = block_bytes_for(bytes);
  }
  std::vector<at::Tensor> placeholders;
  const std::string pickle = payload_pickle(named, placeholders);

  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  auto fail = [&](int err, const std::string& why) {
    ::unlink(path.c_str());
    throw Error(fmt::format("cannot write '{}': {}", path.string(),
                            err != 0 ? std::string(std::strerror(err)) : why));
  };
  if (fd.get() < 0) fail(errno, "");
  HashingSink sink(fd.get(), block_bytes);
  try {
    caffe2::serialize::PyTorchStreamWriter writer(
        [&](const void* data, size_t n) { return sink.write(data, n); });
    // The records in the order torch.save writes them: each storage, then the pickle.
    for (size_t i = 0; i < named.size(); ++i) {
      const at::Tensor host = standalone_cpu(named[i].second, named[i].first);
      writer.writeRecord("data/" + std::to_string(i), host.const_data_ptr(), host.nbytes());
    }
    writer.writeRecord("data.pkl", pickle.data(), pickle.size());
    writer.writeEndOfFile();
    sink.finish();
  } catch (const Error&) {
    ::unlink(path.c_str());
    throw;
  } catch (const std::exception& e) {
    fail(sink.error(), e.what());
  }
  int err = sink.error();
  if (err == 0 && ::fsync(fd.get()) != 0) err = errno;
  if (fd.close() != 0 && err == 0) err = errno;
  if (err != 0) fail(err, "");

  TensorFileSummary out;
  out.bytes = sink.bytes();
  out.fnv1a64 = sink.hash();
  out.block_bytes = block_bytes;
  out.blocks = std::move(sink.blocks());
  // Where each storage's bytes begin, from the zip directory just written (the local headers'
  // lengths and any data descriptors are the zip writer's business).
  caffe2::serialize::PyTorchStreamReader reader(
      std::make_unique<caffe2::serialize::FileAdapter>(path.string()));
  for (size_t i = 0; i < named.size(); ++i) {
    TensorFileEntry entry;
    entry.offset = static_cast<int64_t>(reader.getRecordOffset("data/" + std::to_string(i)));
    entry.dtype = named[i].second.scalar_type();
    entry.shape = named[i].second.sizes().vec();
    out.tensors.emplace_back(named[i].first, std::move(entry));
  }
  return out;
}

nlohmann::json summary_to_json(const TensorFileSummary& s) {
  nlohmann::json out = {{"bytes", s.bytes},
                        {"fnv1a64", s.fnv1a64},
                        {"block_bytes", s.block_bytes},
                        {"blocks", s.blocks}};
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& [name, e] : s.tensors) {
    // A dtype without a safetensors name (complex): no index, and readers load the file whole.
    const auto dtype = safetensors_dtype_name(e.dtype);
    if (!dtype) return out;
    tensors[name] = {{"offset", e.offset}, {"dtype", std::string(*dtype)}, {"shape", e.shape}};
  }
  out["tensors"] = std::move(tensors);
  return out;
}

TensorFileSummary summary_from_json(const nlohmann::json& entry, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("{}: corrupt manifest ({})", what, why));
  };
  TensorFileSummary s;
  try {
    s.bytes = entry.at("bytes").get<int64_t>();
    s.fnv1a64 = entry.at("fnv1a64").get<std::string>();
    s.block_bytes = entry.at("block_bytes").get<int64_t>();
    s.blocks = entry.at("blocks").get<std::vector<std::string>>();
    if (s.bytes < 0 || s.block_bytes < 512 || s.block_bytes > (int64_t{1} << 30)) {
      throw bad("bytes or block_bytes out of range");
    }
    if (static_cast<int64_t>(s.blocks.size()) != (s.bytes + s.block_bytes - 1) / s.block_bytes) {
      throw bad(fmt::format("{} block hashes for {} bytes in blocks of {}", s.blocks.size(),
                            s.bytes, s.block_bytes));
    }
    if (!entry.contains("tensors")) return s;
    for (const auto& [name, t] : entry.at("tensors").items()) {
      TensorFileEntry e;
      e.offset = t.at("offset").get<int64_t>();
      const std::string dtype = t.at("dtype").get<std::string>();
      const auto type = safetensors_dtype_from_name(dtype);
      if (!type) throw bad(fmt::format("tensor '{}' has the unknown dtype '{}'", name, dtype));
      e.dtype = *type;
      e.shape = t.at("shape").get<std::vector<int64_t>>();
      // Bounded before any multiplication can overflow: every dimension within the file.
      int64_t bytes = static_cast<int64_t>(c10::elementSize(e.dtype));
      for (int64_t d : e.shape) {
        if (d < 0 || d > s.bytes) throw bad(fmt::format("tensor '{}' has shape dimension {}", name, d));
        bytes = d == 0 ? 0 : (bytes > s.bytes / d ? s.bytes + 1 : bytes * d);
      }
      if (e.offset < 0 || e.offset > s.bytes || bytes > s.bytes - e.offset) {
        throw bad(fmt::format("tensor '{}' ({} bytes at {}) lies outside the file's {} bytes", name,
                              bytes, e.offset, s.bytes));
      }
      s.tensors.emplace_back(name, std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(e.what());
  }
  return s;
}

}  // namespace frugal::io::detail
