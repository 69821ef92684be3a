#include "torch_archive.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <algorithm>
#include <cstring>
#include <memory>

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

}  // namespace

std::string torch_archive(const c10::IValue& value) {
  std::string pickle;
  torch::jit::Pickler pickler([&](const char* data, size_t n) { pickle.append(data, n); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr,
                              /*memoized_class_types=*/nullptr, /*get_tensor_id=*/nullptr,
                              /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();

  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return n;
  });
  // "data": the record names torch.save uses (data.pkl, data/<key>), which torch.load expects.
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(),
                                     writer);
  if (!writer.finalized()) writer.writeEndOfFile();
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
    return torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"", /*tensor_prefix=*/"",
                                             /*type_resolver=*/std::nullopt,
                                             /*obj_loader=*/std::nullopt, at::Device(at::kCPU),
                                             reader);
  } catch (const c10::Error& e) {
    throw_corrupt(what, e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw_corrupt(what, e.what());
  }
}

}  // namespace frugal::io::detail
