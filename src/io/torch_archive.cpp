#include "torch_archive.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "frugal/util/error.h"

namespace frugal::io::detail {
namespace {

// Lets torch's zip reader work on the caller's bytes in place (torch::pickle_load wants its
// own std::vector copy of what may be gigabytes).
class StringViewReader final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit StringViewReader(std::string_view bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  std::string_view bytes_;
};

// torch's unpickler trusts the memo indices in a pickle: one LONG_BINPUT 1818322805 makes it
// grow its memo table to 1.8 billion entries (29 GB) before anything fails (found by fuzzing:
// fuzz/corpus/checkpoint/regression-pickle-memo-huge.pt). Frugal's own archives are sealed
// against damage, but a plain .pt is not. Every writer numbers memo entries from 0, one per
// put of at least two bytes, so an index past the pickle's size is refused, and so is a length
// past its end. The walk knows the opcodes torch.save writes; at any other one it stops and
// leaves the pickle to torch.
void check_memo_indices(std::string_view pickle, const std::string& what) {
  size_t pos = 0;
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, pickle.data() + at, sizeof v);  // little-endian, as pickle is
    return v;
  };
  while (pos < pickle.size()) {
    const char op = pickle[pos++];
    const size_t left = pickle.size() - pos;
    size_t arg = 0;  // the bytes after the opcode
    switch (op) {
      case '.':  // STOP
        return;
      case 'r':  // LONG_BINPUT
        arg = 4;
        if (left >= 4 && u32(pos) > pickle.size()) {
          throw_corrupt(what, fmt::format("pickle memo index {} past its {} bytes", u32(pos),
                                          pickle.size()));
        }
        break;
      case 'q': case 'h': case 'K': case '\x80':  // BINPUT BINGET BININT1 PROTO
        arg = 1;
        break;
      // SHORT_BINBYTES SHORT_BINSTRING SHORT_BINUNICODE LONG1: a 1-byte length
      case 'C': case 'U': case '\x8c': case '\x8a':
        arg = 1 + (left >= 1 ? static_cast<uint8_t>(pickle[pos]) : 0);
        break;
      case 'M':  // BININT2
        arg = 2;
        break;
      case 'j': case 'J':  // LONG_BINGET BININT
        arg = 4;
        break;
      case 'G': case '\x95':  // BINFLOAT FRAME
        arg = 8;
        break;
      case 'X': case 'B': case 'T':  // BINUNICODE BINBYTES BINSTRING: a 4-byte length
        arg = 4 + (left >= 4 ? static_cast<size_t>(u32(pos)) : 0);
        break;
      case 'c': {  // GLOBAL module\nname\n
        const size_t first = pickle.find('\n', pos);
        const size_t end = first == std::string_view::npos ? first : pickle.find('\n', first + 1);
        if (end == std::string_view::npos) return;
        arg = end + 1 - pos;
        break;
      }
      case '}': case ']': case ')': case '(': case 't': case '\x85': case '\x86': case '\x87':
      case 'a': case 'e': case 's': case 'u': case 'R': case 'b': case 'Q': case 'N': case '\x88':
      case '\x89': case '\x81': case 'l': case 'd': case '0': case '\x94':
        break;  // no argument
      default:
        return;  // not an opcode torch.save writes: torch's reader decides
    }
    // A length past the end is corruption, and torch would allocate it before reading.
    if (arg > left) throw_corrupt(what, "the pickle ends inside an argument");
    pos += arg;
  }
}

}  // namespace

std::string torch_pickle(const c10::IValue& value, std::vector<at::Tensor>* storages) {
  std::string pickle;
  torch::jit::Pickler pickler([&](const char* data, size_t n) { pickle.append(data, n); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr,
                              /*memoized_class_types=*/nullptr, /*get_tensor_id=*/nullptr,
                              /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  if (storages != nullptr) *storages = pickler.tensorData();
  return pickle;
}

void write_torch_archive(std::string_view pickle, size_t storages,
                         const std::function<std::string_view(size_t)>& storage_bytes,
                         const std::function<void(std::string_view)>& out) {
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    out({static_cast<const char*>(data), n});
    return n;
  });
  // "data": the record names torch.save uses (data/<key>, data.pkl), which torch.load expects,
  // in the order torch::jit::writeArchiveAndTensors writes them.
  for (size_t i = 0; i < storages; ++i) {
    const std::string_view bytes = storage_bytes(i);
    writer.writeRecord("data/" + std::to_string(i), bytes.data(), bytes.size());
  }
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  if (!writer.finalized()) writer.writeEndOfFile();
}

std::string torch_archive(const c10::IValue& value) {
  std::vector<at::Tensor> storages;
  const std::string pickle = torch_pickle(value, &storages);
  std::string out;
  std::optional<torch::jit::WriteableTensorData> current;  // alive while its record is written
  write_torch_archive(
      pickle, storages.size(),
      [&](size_t i) {
        current.emplace(torch::jit::getWriteableTensorData(storages[i]));
        return std::string_view(static_cast<const char*>(current->data()), current->sizeInBytes());
      },
      [&](std::string_view bytes) { out.append(bytes); });
  return out;
}

void throw_corrupt(const std::string& what, std::string_view reason) {
  // frugal::Error is one line: keep the first sentence of torch's message (miniz errors go on
  // with paragraphs of advice, c10 errors with a backtrace).
  std::string_view line = reason.substr(0, reason.find('\n'));
  line = line.substr(0, line.find(". "));
  constexpr size_t kMax = 160;
  std::string shown(line.substr(0, kMax));
  if (line.size() > kMax) shown += "...";
  throw Error(fmt::format("{}: corrupt or truncated tensor data ({})", what, shown));
}

c10::IValue read_torch_archive(std::string_view bytes, const std::string& what) {
  // Every failure of torch's reader on bad bytes surfaces as c10::Error (a std::exception);
  // std::bad_alloc comes from corrupt sizes. Both mean the same to the user.
  try {
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<StringViewReader>(bytes));
    if (reader.hasRecord("data.pkl")) {
      const auto [pickle, size] = reader.getRecord("data.pkl");
      check_memo_indices({static_cast<const char*>(pickle.get()), size}, what);
    }
    return torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"", /*tensor_prefix=*/"",
                                             /*type_resolver=*/std::nullopt,
                                             /*obj_loader=*/std::nullopt, at::Device(at::kCPU),
                                             reader);
  } catch (const Error&) {
    throw;  // check_memo_indices's, already in its final words
  } catch (const c10::Error& e) {
    throw_corrupt(what, e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw_corrupt(what, e.what());
  }
}

}  // namespace frugal::io::detail
