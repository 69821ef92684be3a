#include "frugal/util/json_input.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "frugal/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal::json_input {
namespace {

// Closes the descriptor on every way out.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

std::string size_text(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
}

const char* kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a float";
    default: return "binary data";
  }
}

}  // namespace

std::string read_bounded(const fs::path& file, int64_t max_bytes) {
  // O_NONBLOCK: opening a named pipe for reading would wait for a writer.
  FdCloser fd{::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.fd < 0) throw Error(fmt::format("cannot read '{}': {}", file.string(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) {
    throw Error(fmt::format("cannot read '{}': {}", file.string(), std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) throw Error(fmt::format("{}: not a regular file", file.string()));
  if (st.st_size > max_bytes) {
    throw Error(fmt::format("{}: {} bytes, more than the {} frugal reads of such a file",
                            file.string(), st.st_size, size_text(max_bytes)));
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("cannot read '{}': {}", file.string(), std::strerror(errno)));
    }
    if (n == 0) return out;
    out.append(buffer, static_cast<size_t>(n));
    // A file that grows while read is held to the same bound.
    if (static_cast<int64_t>(out.size()) > max_bytes) {
      throw Error(fmt::format("{}: more than the {} frugal reads of such a file", file.string(),
                              size_text(max_bytes)));
    }
  }
}

json parse_file(const fs::path& file, int64_t max_bytes) {
  const std::string text = read_bounded(file, max_bytes);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({})", file.string(), e.what()));
  }
}

std::string describe(const json& v) {
  if (v.is_number() || v.is_boolean() || v.is_null()) return v.dump();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    return s.size() <= 40 ? json(s).dump() : json(s.substr(0, 40)).dump() + "...";
  }
  return kind_of(v);
}

std::string Node::child_key(const std::string& name) const {
  return key_.empty() ? name : key_ + "." + name;
}

void Node::fail(const std::string& message) const {
  throw Error(key_.empty() ? fmt::format("{}: {}", file_, message)
                           : fmt::format("{}: {}: {}", file_, key_, message));
}

const json& Node::object() const {
  if (!value_->is_object()) fail(fmt::format("expected an object, got {}", describe(*value_)));
  return *value_;
}

const json& Node::array() const {
  if (!value_->is_array()) fail(fmt::format("expected an array, got {}", describe(*value_)));
  return *value_;
}

Node Node::at(const std::string& name) const {
  const json& obj = object();
  auto it = obj.find(name);
  if (it == obj.end()) Node(obj, file_, child_key(name)).fail("missing");
  return Node(*it, file_, child_key(name));
}

std::optional<Node> Node::find(const std::string& name) const {
  const json& obj = object();
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  return Node(*it, file_, child_key(name));
}

Node Node::item(size_t i) const {
  const json& arr = array();
  return Node(arr.at(i), file_, fmt::format("{}[{}]", key_, i));
}

int64_t Node::integer(int64_t lo, int64_t hi) const {
  const json& v = *value_;
  const std::string expected = fmt::format("expected an integer from {} to {}", lo, hi);
  // A float (even 2.0), a string or a boolean is refused, as transformers' strict config
  // classes and the tokenizers library refuse them: the file is not what it claims.
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    // (nlohmann reads every non-negative integer as unsigned: 0 comes here too.)
    if (u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo))) {
      fail(fmt::format("{}, got {}", expected, u));
    }
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) fail(fmt::format("{}, got {}", expected, describe(v)));
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) fail(fmt::format("{}, got {}", expected, i));
  return i;
}

double Node::number(double lo, double hi) const {
  const json& v = *value_;
  const std::string expected = fmt::format("expected a number from {} to {}", lo, hi);
  if (!v.is_number()) fail(fmt::format("{}, got {}", expected, describe(v)));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) fail(fmt::format("{}, got {}", expected, v.dump()));
  return d;
}

bool Node::boolean() const {
  if (!value_->is_boolean()) fail(fmt::format("expected true or false, got {}", describe(*value_)));
  return value_->get<bool>();
}

std::string Node::string() const {
  if (!value_->is_string()) fail(fmt::format("expected a string, got {}", describe(*value_)));
  return value_->get<std::string>();
}

int64_t Node::integer_or(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  auto n = find(name);
  return n ? n->integer(lo, hi) : fallback;
}

double Node::number_or(const std::string& name, double fallback, double lo, double hi) const {
  auto n = find(name);
  return n ? n->number(lo, hi) : fallback;
}

bool Node::boolean_or(const std::string& name, bool fallback) const {
  auto n = find(name);
  return n ? n->boolean() : fallback;
}

std::string Node::string_or(const std::string& name, const std::string& fallback) const {
  auto n = find(name);
  return n ? n->string() : fallback;
}

}  // namespace frugal::json_input
