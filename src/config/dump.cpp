// The resolved config as YAML. Written by hand rather than with YAML::Emitter so the output is
// stable and exact: strings always double-quoted (so "null", "~" or "" stay strings), doubles
// in the shortest text that reads back to the same bits.
#include <charconv>
#include <cmath>

#include "frugal/config/load.h"
#include "frugal/models/model_spec.h"
#include "internal.h"
#include "schema.h"

namespace frugal::config_detail {
namespace {

std::string quoted(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          out += "\\x";
          out += hex[ch >> 4];
          out += hex[ch & 15];
        } else {
          out += static_cast<char>(ch);  // UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

std::string yaml_scalar(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  // Both forms are the shortest text that reads back exactly; plain decimals read better
  // unless they get much longer (0.0003 rather than 3e-04, but 1e-08 and 1e+22).
  char buf[400];
  std::string s(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  const std::string fixed(buf,
                          std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed).ptr);
  if (fixed.size() <= s.size() + 3) s = fixed;
  // Keep it a float to every YAML reader (PyYAML wants a dot): 1 -> 1.0, 3e-04 -> 3.0e-04.
  if (s.find('.') == std::string::npos) {
    const auto e = s.find('e');
    s.insert(e == std::string::npos ? s.size() : e, ".0");
  }
  return s;
}

std::string yaml_scalar(const std::string& v) { return quoted(v); }
std::string yaml_scalar(int64_t v) { return std::to_string(v); }
std::string yaml_scalar(uint64_t v) { return std::to_string(v); }
std::string yaml_scalar(bool v) { return v ? "true" : "false"; }

std::string yaml_scalar(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string yaml_scalar(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + quoted(v[i]);
  return out + "]";
}

std::string yaml_scalar(Bytes<const int64_t> v) { return std::to_string(v.value); }
std::string yaml_scalar(const MemoryAmount& v) {
  return v.fraction > 0 ? yaml_scalar(v.fraction) : std::to_string(v.bytes);
}

std::string yaml_scalar(const OptimizerPlace& v) {
  return v.where == OptimizerPlace::nvme ? "nvme" : v ? "true" : "false";
}

std::string yaml_scalar(const std::array<double, 2>& v) {
  return "[" + yaml_scalar(v[0]) + ", " + yaml_scalar(v[1]) + "]";
}

std::string yaml_scalar(const std::map<std::string, std::string>& v) {
  std::string out = "{";
  for (const auto& [key, value] : v)
    out += (out.size() > 1 ? ", " : "") + quoted(key) + ": " + quoted(value);
  return out + "}";
}

std::vector<std::string> split_dots(std::string_view path) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t dot = path.find('.', start);
    parts.emplace_back(path.substr(start, dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

// Each field's type as docs/config.md names it.
std::string yaml_type(const std::string&) { return "string"; }
std::string yaml_type(int64_t) { return "int"; }
std::string yaml_type(uint64_t) { return "uint"; }
std::string yaml_type(double) { return "float"; }
std::string yaml_type(bool) { return "bool"; }
std::string yaml_type(const std::vector<int64_t>&) { return "list of int"; }
std::string yaml_type(const std::vector<std::string>&) { return "list of string"; }
std::string yaml_type(Bytes<const int64_t>) { return "bytes"; }
std::string yaml_type(const MemoryAmount&) { return "bytes or fraction"; }
std::string yaml_type(const OptimizerPlace&) { return "bool, ram or nvme"; }
std::string yaml_type(const std::array<double, 2>&) { return "[float, float]"; }
std::string yaml_type(const std::map<std::string, std::string>&) { return "map"; }

}  // namespace

std::vector<KeyInfo> describe_keys(const std::string& model_type) {
  Config defaults;
  defaults.model.type = model_type;
  const std::optional<ModelSpec> spec = find_model_spec(model_type);
  std::vector<KeyInfo> out;
  const Config& shown = defaults;  // (const: its byte counts are Bytes<const int64_t>)
  for_each_row(shown, [&](const char* section, const char* key, const auto& field,
                             const KeyRule& rule) {
    const std::string path = dotted(section, key);
    std::string accepts = rule.describe(path);
    if (spec && std::string_view(section) == "model" && !model_key_is_common(key)) {
      if (const KeyRule* own = spec->key_rule(key)) {
        const std::string more = own->describe(path);
        if (!more.empty()) accepts += (accepts.empty() ? "" : "; ") + more;
      } else if (!spec->reads_key(key)) {
        accepts = "(not read by model.type " + model_type + ")";
      }
    }
    out.push_back({path, yaml_type(field), yaml_scalar(field), accepts});
  });
  return out;
}

std::vector<std::pair<std::string, std::string>> dump_fields(
    const Config& config, const std::function<bool(std::string_view, std::string_view)>& keep) {
  std::vector<std::pair<std::string, std::string>> out;
  for_each_field(config, [&](const char* section, const char* key, const auto& field) {
    if (keep(section, key)) out.emplace_back(std::string(section) + "." + key, yaml_scalar(field));
  });
  return out;
}

std::string dump(const Config& config,
                 const std::function<bool(std::string_view, std::string_view)>& keep) {
  std::string out;
  std::vector<std::string> open;  // the section whose map is being written, by level
  for_each_field(config, [&](const char* section, const char* key, const auto& field) {
    if (!keep(section, key)) return;
    // Open the levels of `section` not already open: "strategy" stays open from precision
    // through grad_scaler's keys to accumulation.
    const std::vector<std::string> path = split_dots(section);
    size_t common = 0;
    while (common < open.size() && common < path.size() && open[common] == path[common])
      ++common;
    for (size_t level = common; level < path.size(); ++level)
      out += std::string(2 * level, ' ') + path[level] + ":\n";
    open = path;
    out += std::string(2 * path.size(), ' ') + key + ": " + yaml_scalar(field) + "\n";
  });
  return out;
}

}  // namespace frugal::config_detail

namespace frugal {

std::vector<KeyInfo> config_keys(const std::string& model_type) {
  return config_detail::describe_keys(model_type);
}

std::string to_yaml(const Config& config) {
  return config_detail::dump(config, [&config](std::string_view section, std::string_view key) {
    return config_detail::key_is_read(config, section, key);
  });
}

}  // namespace frugal
