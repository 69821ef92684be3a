// The bad-input corpus (tests/bad_inputs/corpus/, one folder per case; its README.md says how a
// case is written). Each case runs the frugal CLI on a copy of its folder and must fail as a
// user error: exit code 2, one line on stderr that says what is wrong and where, and every file
// that was there before exactly as it was.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/cli.h"
#include "support/model_configs.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace frugal;

namespace {

// stderr without the notes an ASan build's runtime adds to a process's own output: with
// allocator_may_return_null=1 (tools/sanitizers/env.sh) an impossible allocation fails as it
// does without ASan, and ASan says so on a line of its own ("==PID==WARNING: AddressSanitizer
// failed to allocate 0x... bytes"). Elsewhere the text is returned as it is.
std::string without_sanitizer_notes(const std::string& err) {
#if defined(__SANITIZE_ADDRESS__)
  std::string out;
  size_t start = 0;
  while (start < err.size()) {
    size_t end = err.find('\n', start);
    end = end == std::string::npos ? err.size() : end + 1;
    const std::string line = err.substr(start, end - start);
    const bool note = line.rfind("==", 0) == 0 &&
                      line.find("==WARNING: AddressSanitizer failed to allocate") != std::string::npos;
    if (!note) out += line;
    start = end;
  }
  return out;
#else
  return err;
#endif
}

// What `setup: trained` provides (made once per test run, copied into each case that asks):
// tiny.yaml, the 2-step run it trained (runs/tiny, one checkpoint at step 2) and that run
// exported for transformers (hf/: config.json and model.safetensors). A tiny Llama, so that
// the checkpoint is a few KiB and the export is a folder `model.init_from` takes.
const std::string kTrainedConfig =
    "run: {name: tiny, dir: runs, seed: 1}\n"
    "model: " + test::transformer_yaml("llama", 1, 2, 8, 8, 32, "intermediate_size: 16") + "\n"
    "data: {type: synthetic, micro_batch_size: 2, synthetic_samples: 16, num_workers: 0}\n"
    "optim: {type: adamw, lr: 0.01}\n"
    "train: {max_steps: 2, log_every: 1, eval_batches: 0, progress: none}\n";

fs::path corpus_dir() { return test::source_dir() / "tests/bad_inputs/corpus"; }

[[noreturn]] void bad_case(const std::string& why) { throw std::runtime_error(why); }

// Copies a folder's regular files and subfolders (the corpus holds nothing else); `skip` names
// top-level entries left out.
void copy_tree(const fs::path& from, const fs::path& to, const std::set<std::string>& skip = {}) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(from)) {
    const std::string name = entry.path().filename().string();
    if (skip.contains(name)) continue;
    const auto type = entry.symlink_status().type();
    if (type == fs::file_type::directory) {
      copy_tree(entry.path(), to / name);
    } else if (type == fs::file_type::regular) {
      fs::copy_file(entry.path(), to / name, fs::copy_options::overwrite_existing);
    } else {
      bad_case("corpus entry '" + entry.path().string() + "' is neither a file nor a folder");
    }
  }
}

// One entry of a case folder as it was: its kind, and for a file its bytes and mtime.
struct FileState {
  mode_t type = 0;
  std::string bytes;
  int64_t mtime_ns = 0;
  bool operator==(const FileState&) const = default;
};
using Snapshot = std::map<std::string, FileState>;

// lstat, never following links: a case may hold a symlink loop or a named pipe, which must be
// recorded, not opened.
void snapshot_into(const fs::path& root, const fs::path& dir, Snapshot& out) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0) continue;  // gone already: seen as missing
    FileState state;
    state.type = st.st_mode & S_IFMT;
    if (S_ISDIR(st.st_mode)) {
      // Recorded too: a folder left behind (a temporary one, or an output's parent made for
      // nothing) is something written.
      out[entry.path().string().substr(root.string().size() + 1) + "/"] = state;
      snapshot_into(root, entry.path(), out);
      continue;
    }
    if (S_ISREG(st.st_mode)) {
      state.bytes = test::read_text(entry.path());
      state.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
    }
    // Not fs::relative: it resolves links, and a loop has no resolution.
    out[entry.path().string().substr(root.string().size() + 1)] = std::move(state);
  }
}

// What appeared that was not there before.
std::vector<std::string> new_files(const Snapshot& before, const Snapshot& after) {
  std::vector<std::string> added;
  for (const auto& [name, state] : after) {
    if (!before.contains(name)) added.push_back(name);
  }
  return added;
}

Snapshot snapshot(const fs::path& root) {
  Snapshot out;
  snapshot_into(root, root, out);
  return out;
}

// The files that changed or went missing. train.log is the run's journal: a refused attempt
// (a resume whose checkpoint does not match the config) appends its first lines, so that file
// may grow, as long as what it held stays.
std::vector<std::string> changed_files(const Snapshot& before, const Snapshot& after) {
  std::vector<std::string> changed;
  for (const auto& [name, state] : before) {
    const auto it = after.find(name);
    if (it == after.end()) {
      changed.push_back(name + " (gone)");
    } else if (!(it->second == state)) {
      const bool appended_log = fs::path(name).filename() == "train.log" &&
                                it->second.type == state.type &&
                                it->second.bytes.starts_with(state.bytes);
      if (!appended_log) changed.push_back(name);
    }
  }
  return changed;
}

std::string read_or_fail(const fs::path& file) {
  if (!fs::is_regular_file(file)) bad_case("mutate: no file '" + file.string() + "'");
  return test::read_text(file);
}

std::string from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) bad_case("mutate: patch.hex has an odd length");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// One `mutate` entry: {"file": F, OP: ARG} with exactly one OP, applied to the case's copy.
void apply_mutation(const fs::path& dir, const json& m) {
  const std::set<std::string> ops = {"truncate", "flip", "replace", "remove",
                                     "write",    "patch", "fifo",   "symlink"};
  if (!m.is_object() || !m.contains("file") || m.size() != 2) {
    bad_case("mutate: each entry is {\"file\": ..., OP: ...}: " + m.dump());
  }
  const fs::path file = dir / m["file"].get<std::string>();
  const std::string op = std::find_if(m.items().begin(), m.items().end(), [](const auto& kv) {
                           return kv.key() != "file";
                         }).key();
  if (!ops.contains(op)) bad_case("mutate: unknown operation '" + op + "'");
  const json& arg = m[op];
  if (op == "truncate") {  // to this many bytes
    read_or_fail(file);
    if (::truncate(file.c_str(), arg.get<off_t>()) != 0) bad_case("mutate: truncate failed");
  } else if (op == "flip") {  // invert the byte at this offset (negative: from the end)
    std::string bytes = read_or_fail(file);
    const int64_t n = arg.get<int64_t>();
    const int64_t at = n < 0 ? static_cast<int64_t>(bytes.size()) + n : n;
    if (at < 0 || at >= static_cast<int64_t>(bytes.size())) bad_case("mutate: flip past the end");
    bytes[static_cast<size_t>(at)] = static_cast<char>(~bytes[static_cast<size_t>(at)]);
    test::write_text(file, bytes);
  } else if (op == "replace") {  // [from, to]: the first occurrence, which must be there
    std::string bytes = read_or_fail(file);
    const auto from = arg.at(0).get<std::string>(), to = arg.at(1).get<std::string>();
    const size_t at = bytes.find(from);
    if (at == std::string::npos) bad_case("mutate: '" + from + "' is not in " + file.string());
    test::write_text(file, bytes.replace(at, from.size(), to));
  } else if (op == "remove") {
    if (::unlink(file.c_str()) != 0) bad_case("mutate: cannot remove " + file.string());
  } else if (op == "write") {  // replace the whole content
    test::write_text(file, arg.get<std::string>());
  } else if (op == "patch") {  // {"offset": N, "hex": "..."}: overwrite bytes in place
    std::string bytes = read_or_fail(file);
    const std::string patch = from_hex(arg.at("hex").get<std::string>());
    const size_t at = arg.at("offset").get<size_t>();
    if (at + patch.size() > bytes.size()) bad_case("mutate: patch past the end");
    test::write_text(file, bytes.replace(at, patch.size(), patch));
  } else if (op == "fifo") {  // a named pipe (git stores none)
    if (::mkfifo(file.c_str(), 0644) != 0) bad_case("mutate: mkfifo failed");
  } else {  // symlink: a link to this target (relative to the link), e.g. itself for a loop
    if (::symlink(arg.get<std::string>().c_str(), file.c_str()) != 0) {
      bad_case("mutate: symlink failed");
    }
  }
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) {
    s.replace(at, from.size(), to);
  }
  return s;
}

struct Case {
  std::string name;
  json spec;
};

struct Outcome {
  std::string error;  // the case itself is malformed or could not be prepared
  test::CommandResult result;
  std::vector<std::string> changed;
  std::vector<std::string> added;
  double seconds = 0;
};

std::vector<Case> load_cases() {
  std::vector<Case> cases;
  for (const auto& entry : fs::directory_iterator(corpus_dir())) {
    if (!entry.is_directory()) continue;
    Case c;
    c.name = entry.path().filename().string();
    c.spec = json::parse(test::read_text(entry.path() / "case.json"));
    cases.push_back(std::move(c));
  }
  std::sort(cases.begin(), cases.end(),
            [](const Case& a, const Case& b) { return a.name < b.name; });
  return cases;
}

Outcome run_case(const Case& c, const fs::path& trained, const fs::path& scratch) {
  Outcome out;
  try {
    const std::set<std::string> keys = {"about", "args", "expect", "env", "setup", "mutate"};
    for (const auto& [key, value] : c.spec.items()) {
      if (!keys.contains(key)) bad_case("case.json: unknown key '" + key + "'");
    }
    const fs::path dir = scratch / c.name;
    const std::string setup = c.spec.value("setup", std::string());
    if (setup == "trained") {
      copy_tree(trained, dir);
    } else if (!setup.empty()) {
      bad_case("case.json: unknown setup '" + setup + "'");
    }
    copy_tree(corpus_dir() / c.name, dir, {"case.json"});
    for (const json& m : c.spec.value("mutate", json::array())) apply_mutation(dir, m);

    std::string command = "cd " + test::quote(dir.string()) + " && ";
    if (c.spec.contains("env")) {
      command += "env";
      for (const auto& [key, value] : c.spec["env"].items()) {
        command += " " + test::quote(key + "=" + value.get<std::string>());
      }
      command += " ";
    }
    command += test::quote(test::frugal_binary()) + " " +
               replace_all(c.spec.at("args").get<std::string>(), "{dir}", dir.string());

    const Snapshot before = snapshot(dir);
    const auto start = std::chrono::steady_clock::now();
    out.result = test::run_command(command, /*timeout_s=*/60);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Snapshot after = snapshot(dir);
    out.changed = changed_files(before, after);
    out.added = new_files(before, after);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

std::vector<std::string> expected_fragments(const json& expect) {
  std::vector<std::string> out;
  if (expect.is_string()) out.push_back(expect.get<std::string>());
  if (expect.is_array()) {
    for (const json& e : expect) out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace

TEST_CASE("the bad-input corpus: every case exits 2 with one line and changes nothing",
          "[bad_input][corpus]") {
  const std::vector<Case> cases = load_cases();
  // The issue asked for at least 60 cases across configs, data, checkpoints and exports, and
  // the launcher's and environment's values; issue 29 for 40 more on Hugging Face folders'
  // and tokenizers' files (hf-*, data-tokenizer-*).
  CHECK(cases.size() >= 100);

  test::TempDir scratch("frugal-corpus");
  const fs::path trained = scratch / "trained";
  fs::create_directories(trained);
  test::write_text(trained / "tiny.yaml", kTrainedConfig);
  const std::string in_trained = "cd " + test::quote(trained.string()) + " && " +
                                 test::quote(test::frugal_binary()) + " ";
  {
    const auto r = test::run_command(in_trained + "train tiny.yaml", 300);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const auto e = test::run_command(in_trained + "export runs/tiny --format hf -o hf", 300);
    INFO(e.out << e.err);
    REQUIRE(e.exit_code == 0);
  }

  // Each case is its own frugal process, most of whose time is loading LibTorch: a few at a
  // time keep the whole corpus to seconds.
  std::vector<Outcome> outcomes(cases.size());
  std::atomic<size_t> next{0};
  const unsigned workers = std::clamp(std::thread::hardware_concurrency(), 2u, 8u);
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < cases.size();) {
        outcomes[i] = run_case(cases[i], trained, scratch.path());
      }
    });
  }
  for (auto& t : pool) t.join();

  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Outcome& o = outcomes[i];
    INFO("case " << c.name << " (tests/bad_inputs/corpus/" << c.name << "): "
                 << c.spec.value("about", std::string()));
    INFO("exit code " << o.result.exit_code << " after " << o.seconds << " s\nstdout: "
                      << o.result.out << "\nstderr: " << o.result.err);
    INFO("case error: " << o.error);
    CHECK(o.error.empty());
    if (!o.error.empty()) continue;
    CHECK(o.result.exit_code == 2);
    // One line: the error, and nothing else (no warning, no second line of advice).
    const std::string err = without_sanitizer_notes(o.result.err);
    CHECK(test::count_lines(err) == 1);
    CHECK((!err.empty() && err.back() == '\n'));
    CHECK(err.rfind("frugal: error: ", 0) == 0);
    const std::vector<std::string> fragments = expected_fragments(c.spec.value("expect", json()));
    CHECK(!fragments.empty());
    for (const std::string& f : fragments) {
      INFO("expected in stderr: " << f);
      CHECK(err.find(f) != std::string::npos);
    }
    INFO("changed: " << [&] {
      std::string s;
      for (const auto& f : o.changed) s += f + " ";
      return s;
    }());
    CHECK(o.changed.empty());
    INFO("new: " << [&] {
      std::string s;
      for (const auto& f : o.added) s += f + " ";
      return s;
    }());
    CHECK(o.added.empty());
  }
}
