// The checkpoint payload is one pickled dict in a sealed torch archive (see docs/formats.md):
//   {"format": "frugal.tensors", "version": 1, "names": [...], "tensors": {name: tensor}}
// The seal (archive_seal.h) catches any damaged byte before torch parses the archive; the names
// list, beside the dict, pins the order independently of how a dict is rebuilt.
#include "frugal/io/tensor_io.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <unordered_map>

#include "archive_seal.h"
#include "cpu_tensor.h"
#include "torch_archive.h"

namespace frugal::io {
namespace {

constexpr const char* kFormat = "frugal.tensors";
constexpr int64_t kVersion = 1;

// Every getter below stands for "this is not what save_tensors wrote": one error, naming what.
struct Reader {
  const std::string& what;

  [[noreturn]] void corrupt(std::string_view reason) const { detail::throw_corrupt(what, reason); }

  const c10::IValue& field(const c10::impl::GenericDict& dict, const char* key) const {
    auto it = dict.find(c10::IValue(std::string(key)));
    if (it == dict.end()) corrupt(fmt::format("no '{}' entry", key));
    return it->value();
  }

  // A dict name -> tensor, in dict order (what torch.save of a dict of tensors holds).
  NamedTensors tensor_dict(const c10::IValue& value) const {
    if (!value.isGenericDict()) corrupt("expected a dict of tensors");
    NamedTensors out;
    for (const auto& entry : value.toGenericDict()) {
      if (!entry.key().isString() || !entry.value().isTensor()) {
        corrupt("expected a dict of tensors, found another kind of entry");
      }
      out.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
    }
    return out;
  }

  NamedTensors checkpoint(const c10::impl::GenericDict& dict) const {
    const c10::IValue& version = field(dict, "version");
    if (!version.isInt() || version.toInt() != kVersion) {
      std::string shown = version.isInt() ? std::to_string(version.toInt()) : version.tagKind();
      corrupt(fmt::format("unsupported version {} (this build reads {})", shown, kVersion));
    }
    const c10::IValue& names = field(dict, "names");
    if (!names.isList()) corrupt("'names' is not a list");
    NamedTensors stored = tensor_dict(field(dict, "tensors"));
    std::unordered_map<std::string, at::Tensor> by_name(stored.begin(), stored.end());
    if (names.toListRef().size() != stored.size()) corrupt("'names' and 'tensors' differ");
    NamedTensors out;
    out.reserve(stored.size());
    for (const c10::IValue& name : names.toListRef()) {
      if (!name.isString()) corrupt("'names' holds a non-string");
      auto it = by_name.find(name.toStringRef());
      if (it == by_name.end()) corrupt(fmt::format("no tensor named '{}'", name.toStringRef()));
      out.emplace_back(name.toStringRef(), it->second);
    }
    return out;
  }
};

}  // namespace

std::string save_tensors(const NamedTensors& named) {
  NamedTensors cpu = detail::standalone_cpu_all(named);
  c10::List<std::string> names;
  c10::Dict<std::string, at::Tensor> tensors;
  for (const auto& [name, tensor] : cpu) {
    names.push_back(name);
    tensors.insert(name, tensor);
  }
  c10::impl::GenericDict payload(c10::StringType::get(), c10::AnyType::get());
  payload.insert(std::string("format"), std::string(kFormat));
  payload.insert(std::string("version"), kVersion);
  payload.insert(std::string("names"), names);
  payload.insert(std::string("tensors"), tensors);
  std::string archive = detail::torch_archive(c10::IValue(payload));
  detail::seal_archive(archive);
  return archive;
}

NamedTensors load_tensors(std::string_view bytes, const std::string& what_for_errors) {
  bool sealed = detail::check_archive_seal(bytes, what_for_errors);
  c10::IValue value = detail::read_torch_archive(bytes, what_for_errors);
  Reader reader{what_for_errors};
  if (!value.isGenericDict()) reader.corrupt("expected a dict of tensors");
  const c10::impl::GenericDict& dict = value.toGenericDict();
  auto format = dict.find(c10::IValue(std::string("format")));
  if (format != dict.end() && format->value().isString() &&
      format->value().toStringRef() == kFormat) {
    // save_tensors always seals: a frugal payload without a seal lost it to damage.
    if (!sealed) reader.corrupt("the checksum trailer is missing");
    return reader.checkpoint(dict);
  }
  // Anything else must be a plain name -> tensor dict (write_pt, Python's torch.save).
  return reader.tensor_dict(value);
}

}  // namespace frugal::io
