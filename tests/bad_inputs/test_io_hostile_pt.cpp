// A .pt file is a zip holding a pickle, and Python's pickle runs code: a GLOBAL names any
// callable and REDUCE calls it. frugal reads .pt files with torch's C++ unpickler, which has no
// Python to call: it knows a fixed set of torch's own globals (tensor rebuilds, storages) and
// refuses any other. These are the classic payloads; each must be refused with an error naming
// the file, and must not have run (docs/security.md).
#include <caffe2/serialize/inline_container.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <string>

#include "frugal/io/tensor_io.h"
#include "frugal/util/error.h"
#include "support/helpers.h"

namespace fs = std::filesystem;

namespace hostile_pt {
namespace {

// A protocol-2 pickle calling module.name(argument): GLOBAL, the string, TUPLE1, REDUCE, STOP.
std::string reduce_pickle(const std::string& module, const std::string& name,
                          const std::string& argument) {
  std::string p = "\x80\x02";
  p += "c" + module + "\n" + name + "\n";
  const auto n = static_cast<uint32_t>(argument.size());
  p += 'X';
  for (int i = 0; i < 4; ++i) p += static_cast<char>((n >> (8 * i)) & 0xff);
  p += argument;
  p += "\x85R.";
  return p;
}

// The pickle as torch.save lays it out: data.pkl in a zip archive.
std::string pt_archive(const std::string& pickle) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return n;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeEndOfFile();
  return out;
}

}  // namespace

TEST_CASE("a .pt whose pickle calls a global (os.system, eval, exec) is refused, not run",
          "[io][bad_input][security]") {
  frugal::test::TempDir dir("frugal-hostile-pt");
  const fs::path marker = dir / "ran";
  const std::string shell = "touch '" + marker.string() + "'";
  const std::string python = "open('" + marker.string() + "', 'w')";
  struct Payload {
    std::string module, name, argument;
  };
  const std::vector<Payload> payloads{{"posix", "system", shell},
                                      {"os", "system", shell},
                                      {"builtins", "eval", python},
                                      {"builtins", "exec", python},
                                      {"__builtin__", "eval", python},
                                      {"subprocess", "check_call", shell}};
  for (const Payload& p : payloads) {
    INFO(p.module << "." << p.name);
    const std::string bytes = pt_archive(reduce_pickle(p.module, p.name, p.argument));
    CHECK_THROWS_WITH(frugal::io::load_tensors(bytes, "hostile.pt"),
                      Catch::StartsWith("hostile.pt: corrupt or truncated tensor data ("));
    CHECK_FALSE(fs::exists(marker));
  }
  // The control: the same archive layout with a plain dict of no tensors is read, so the
  // refusals above are the unpickler's, not a malformed archive's. (EMPTY_DICT, STOP.)
  CHECK(frugal::io::load_tensors(pt_archive("\x80\x02}."), "empty.pt").empty());
}

}  // namespace hostile_pt
