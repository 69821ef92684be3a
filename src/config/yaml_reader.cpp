// Reading YAML files and resolving `extends:` chains (a parent path is relative to the file
// that names it; the child's keys win; cycles are errors naming the whole chain).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "frugal/util/error.h"
#include "internal.h"

namespace frugal::config_detail {
namespace {

namespace fs = std::filesystem;

// YAML aliases (*a) share one node however often they are used, but reading the document
// follows every use: a few lines whose aliases double at each level stand for billions of
// keys (a "billion laughs" file) and would keep the reader busy for hours. A config is a few
// hundred nodes; this many is no config. Counted with the aliases expanded, stopping at the
// limit.
constexpr size_t kMaxNodes = 100000;
// The same for bytes, checked while reading: a config is a few KiB, and a path to something
// endless (/dev/zero, a huge log given by mistake) must fail instead of filling memory.
constexpr size_t kMaxFileBytes = 16 << 20;

bool within_node_limit(const YAML::Node& node, size_t& left) {
  if (left == 0) return false;
  --left;
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!within_node_limit(it->first, left) || !within_node_limit(it->second, left)) return false;
    }
  } else if (node.IsSequence()) {
    for (const YAML::Node& item : node) {
      if (!within_node_limit(item, left)) return false;
    }
  }
  return true;
}

class Reader {
 public:
  // `from` is the `extends:` key naming this file (null for the top-level file).
  Entry read_file(const std::string& path, const Loc* from) {
    const std::string text = read_text_file(path, from);
    std::error_code ec;
    const std::string canonical = fs::weakly_canonical(path, ec).string();
    for (size_t i = 0; i < chain_.size(); ++i) {
      if (chain_[i].canonical != canonical) continue;
      std::string cycle;
      for (size_t j = i; j < chain_.size(); ++j) cycle += chain_[j].shown + " -> ";
      fail(*from, fmt::format("extends cycle: {}{}", cycle, path));
    }
    chain_.push_back({canonical, path});
    Entry entry = read_text(text, path, fs::path(path).parent_path());
    chain_.pop_back();
    return entry;
  }

  Entry read_text(const std::string& text, const std::string& name, const fs::path& dir) {
    // YAML text holds no NUL byte; a file that does is binary (a checkpoint or an archive
    // given as the config), which the parser would report by some byte's escape ("unknown
    // escape character: " and the raw byte).
    if (const size_t nul = text.find('\0'); nul != std::string::npos) {
      const size_t line_begin = nul == 0 ? 0 : text.rfind('\n', nul - 1) + 1;  // npos + 1 == 0
      const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + nul, '\n'));
      const int column = static_cast<int>(nul - line_begin) + 1;
      fail(Loc{name, line, column}, "a NUL byte: a binary file, not YAML");
    }
    const YAML::Node doc = parse(text, name);
    if (doc.IsNull()) return map_entry("", "", Loc{name});  // an empty file: all defaults
    if (size_t left = kMaxNodes; !within_node_limit(doc, left))
      fail(at(name, doc.Mark()),
           fmt::format("more than {} YAML nodes once its aliases are expanded: not a config",
                       kMaxNodes));
    if (!doc.IsMap())
      fail(at(name, doc.Mark()),
           fmt::format("a config file is a map of sections, got {}", describe(doc)));
    Entry root = to_entry(doc, "", "", Loc{name}, name);
    expand_shorthands(root);  // before merging, so a shorthand merges like the map it means

    const Entry* extends = root.find("extends");
    if (!extends) return root;
    if (extends->is_map || !extends->value().IsScalar() || extends->value().Scalar().empty())
      fail(extends->loc, fmt::format("extends: expected a file path, got {}",
                                     extends->is_map ? "a map" : describe(extends->value())));
    const fs::path parent = dir / extends->value().Scalar();
    const Loc from = extends->loc;
    std::erase_if(root.children, [](const Entry& e) { return e.key == "extends"; });
    Entry merged = read_file(parent.string(), &from);
    merge_into(merged, std::move(root));
    return merged;
  }

 private:
  struct Link {
    std::string canonical;  // to recognise a file reached twice
    std::string shown;      // as the user wrote it, for the message
  };

  static YAML::Node parse(const std::string& text, const std::string& name) {
    try {
      return YAML::Load(text);
    } catch (const YAML::Exception& e) {
      fail(at(name, e.mark), "invalid YAML: " + e.msg);
    }
  }

  static std::string read_text_file(const std::string& path, const Loc* from) {
    auto refuse = [&](const std::string& why) {
      const std::string message = fmt::format("cannot read config file '{}': {}", path, why);
      if (from) fail(*from, message);
      throw Error(message);  // the top-level file: its name is in the message already
    };
    std::error_code ec;
    if (fs::is_directory(path, ec)) refuse("it is a directory");
    std::ifstream in(path, std::ios::binary);
    if (!in) refuse(std::strerror(errno));
    std::string text;
    std::array<char, 1 << 16> chunk;
    while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0) {
      text.append(chunk.data(), static_cast<size_t>(in.gcount()));
      if (text.size() > kMaxFileBytes) {
        refuse(fmt::format("larger than {} MiB: not a config file", kMaxFileBytes >> 20));
      }
    }
    if (in.bad()) refuse(std::strerror(errno));
    return text;
  }

  std::vector<Link> chain_;
};

}  // namespace

Entry read_config_file(const std::string& path) { return Reader().read_file(path, nullptr); }

Entry read_config_text(const std::string& text, const std::string& source_name) {
  return Reader().read_text(text, source_name, fs::path(source_name).parent_path());
}

}  // namespace frugal::config_detail
