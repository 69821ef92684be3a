// The GPU machine's bundle (tools/gpu/bundle.sh; docs/gpu.md) is relocatable: built from this
// build, copied elsewhere (the original removed), run with torch found through a second venv at
// another path, its binaries load that torch and the bundle's own libraries, carry no absolute
// RUNPATH, and its CPU tests, a training run (TensorBoard's files too) and the GPU check's CPU
// dry runs (both modes, with faults injected) return complete summaries from there.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include "support/helpers.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

test::CommandResult must(const std::string& command, int timeout_s = 600) {
  test::CommandResult r = test::run_command(command, timeout_s);
  INFO(command << "\n-- stdout:\n" << r.out << "\n-- stderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// The libraries a process loaded, by file name, as the dynamic loader reports them.
std::map<std::string, std::string> loaded_libraries(const std::string& ld_debug_output) {
  std::map<std::string, std::string> by_name;
  std::regex init(R"(calling init: (.+)$)");
  std::istringstream in(ld_debug_output);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, init)) by_name[fs::path(m[1].str()).filename()] = m[1].str();
  }
  return by_name;
}

// The summary's table rows: (check, result), in order; every row must have five cells and a
// result that is one of the five words (PASS, FAIL, SKIPPED, INCONCLUSIVE, MEASURED).
std::vector<std::pair<std::string, std::string>> summary_rows(const std::string& summary) {
  std::vector<std::pair<std::string, std::string>> rows;
  const std::regex result(R"((PASS|FAIL|SKIPPED|INCONCLUSIVE|MEASURED)( \(.+\))?)");
  std::istringstream in(summary);
  bool table = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "|---|---|---|---|---|") {
      table = true;
      continue;
    }
    if (!table || line.rfind("| ", 0) != 0) {
      table = table && line.rfind("| ", 0) == 0;
      continue;
    }
    std::vector<std::string> cells;
    for (size_t at = 2; at < line.size();) {
      const size_t end = line.find(" | ", at);
      cells.push_back(line.substr(at, end == std::string::npos ? line.size() - at - 2 : end - at));
      if (end == std::string::npos) break;
      at = end + 3;
    }
    INFO(line);
    CHECK(cells.size() == 5);
    CHECK(std::regex_match(cells.at(1), result));
    rows.emplace_back(cells.at(0), cells.at(1));
  }
  return rows;
}
std::vector<std::string> titles(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::vector<std::string> t;
  for (const auto& r : rows) t.push_back(r.first);
  return t;
}
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("the GPU bundle runs relocated, with torch from another venv",
          "[integration][bundle][slow]") {
  test::TempDir dir("frugal-bundle");
  const fs::path built = dir / "built", bundle = dir / "elsewhere" / "gpu bundle";
  must("bash " + test::quote((test::source_dir() / "tools/gpu/bundle.sh").string()) +
       " --build-dir " + test::quote(test::binary_dir().string()) + " --no-deps -o " +
       test::quote(built.string()));
  const std::string manifest = test::read_text(built / "MANIFEST");
  INFO(manifest);
  CHECK_THAT(manifest, Catch::Contains("torch: 2.11.0"));
  // The source-build fallback's source tree travels with it (check.sh builds from it where the
  // bundle's frugal does not start).
  CHECK_THAT(manifest, Catch::Contains("source-build fallback: source.tar.gz"));
  auto source = must("tar -tzf " + test::quote((built / "source.tar.gz").string()));
  CHECK_THAT(source.out, Catch::Contains("tools/gpu/build_from_source.sh\n"));
  CHECK_THAT(source.out, Catch::Contains("CMakeLists.txt\n"));
  // The size limit: bundle.sh fails over 48 MiB; measured again here on the copy.
  fs::create_directories(bundle.parent_path());
  must("cp -a " + test::quote(built.string()) + " " + test::quote(bundle.string()) + " && rm -rf " +
       test::quote(built.string()));
  int64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(bundle)) {
    if (e.is_regular_file() && !e.is_symlink()) bytes += static_cast<int64_t>(e.file_size());
  }
  CHECK(bytes <= 48ll << 20);

  // A second venv whose site-packages are links to the first's: the same torch, another path.
  auto site = must(
      test::python() +
      " -c 'import importlib.util as u, os; "
      "print(os.path.dirname(os.path.dirname(u.find_spec(\"torch\").origin)), end=\"\")'");
  const fs::path venv = dir / "venv2";
  must(test::python() + " -m venv --without-pip " + test::quote(venv.string()));
  auto site2 = must(test::quote((venv / "bin/python").string()) +
                    " -c 'import site; print(site.getsitepackages()[0], end=\"\")'");
  must("cp -al " + test::quote(site.out) + "/. " + test::quote(site2.out) +
       "/ 2>/dev/null || cp -as " + test::quote(site.out) + "/. " + test::quote(site2.out) + "/");
  const std::string env = "PATH=" + test::quote((venv / "bin").string()) + ":\"$PATH\" ";
  const std::string run = test::quote((bundle / "run").string());

  // The launcher finds the second venv's torch.
  auto torch_lib = must(env + run + " --torch-lib");
  CHECK(torch_lib.out == site2.out + "/torch/lib\n");

  // No absolute RUNPATH / RPATH in any of the bundle's binaries or libraries.
  auto paths = must("for f in " + test::quote((bundle / "bin").string()) + "/* " +
                    test::quote((bundle / "lib").string()) +
                    "/*; do readelf -d \"$f\" | grep -E 'R(UN)?PATH' || true; done");
  INFO(paths.out);
  CHECK(paths.out.find("[$ORIGIN") != std::string::npos);
  CHECK_FALSE(std::regex_search(paths.out, std::regex(R"(R(UN)?PATH\)[^\[]*\[[^$])")));

  // What the loader took, and from where: torch from the second venv, the rest from the bundle.
  auto version = must(env + "LD_DEBUG=libs " + run + " bin/frugal --version");
  const auto libs = loaded_libraries(version.err);
  REQUIRE(libs.count("libtorch_cpu.so") == 1);
  CHECK(libs.at("libtorch_cpu.so").rfind(site2.out, 0) == 0);
  int from_bundle = 0;
  for (const auto& [name, path] : libs) {
    for (const char* ours : {"libfrugal.so", "libyaml-cpp.so", "libspdlog.so", "libfmt.so"}) {
      if (name.rfind(ours, 0) != 0) continue;
      INFO(name << " loaded from " << path);
      CHECK(path.rfind(bundle.string(), 0) == 0);
      ++from_bundle;
    }
  }
  CHECK(from_bundle == 4);

  // The bundle's CPU tests, from the copy (they find its binaries and configs through run):
  // the config unit tests, a second's worth. The suite itself runs them all from the build;
  // here only loading and finding files from the copy is in question (the offload tests
  // that ran here before cost 40 of the suite's seconds and showed nothing more).
  auto tests = must(env + run + " bin/frugal_tests '[config][unit]'");
  CHECK_THAT(tests.out, Catch::Contains("All tests passed"));
  // A training run from the copy, with TensorBoard's event files: libfrugal loads their
  // encoding library (libfrugal_tensorboard_events.so) from the bundle's lib/.
  const fs::path runs = dir / "runs";
  must(env + run + " bin/frugal train configs/tiny-gpt.yaml --set run.dir=" +
       test::quote(runs.string()) +
       " --set train.progress=none --set generate.tokens=0 --set train.tensorboard=true");
  CHECK(fs::exists(runs / "tiny-gpt" / "metrics.jsonl"));
  int event_files = 0;
  for (const auto& e : fs::directory_iterator(runs / "tiny-gpt" / "tensorboard")) {
    event_files += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0 &&
                   e.file_size() > 100;
  }
  CHECK(event_files == 1);

  // The GPU check's dry runs on this CPU, from the copy, with faults injected: a run that hangs
  // (stopped at its limit), a reference that fails, a benchmark figure that never comes. Each
  // summary still has exactly one row per check, in order, each result one of the five words.
  const std::string check_sh = "bash " + test::quote((bundle / "check.sh").string());
  // One dry run: its summary's rows, after checking that they are exactly `--list`'s, in order;
  // the run fails (exit 1) for the faults injected.
  auto dry_run = [&](const fs::path& out, const std::string& knobs, const std::string& mode) {
    auto check = test::run_command(
        env + "OUT=" + test::quote(out.string()) + " " + knobs + " " + check_sh + mode, 900);
    const std::string summary = test::read_text(out / "summary.md");
    INFO(check.out << check.err << "\n-- summary.md:\n" << summary);
    CHECK(check.exit_code == 1);
    const auto rows = summary_rows(summary);
    CHECK(titles(rows) == lines(must(env + check_sh + " --list" + mode).out));
    return std::make_pair(rows, summary);
  };
  {
    const fs::path out = dir / "gpu-out";
    const auto [rows, summary] =
        dry_run(out,
                "FRUGAL_GPU_RUN_TIMEOUT=30 FRUGAL_GPU_HANG_LIMIT=3 "
                "FRUGAL_GPU_INJECT='hang=acc4 fail=drop-none'",
                "");
    for (const auto& [title, result] : rows) {
      INFO(title << ": " << result);
      if (title == "accumulation 4 (micro-batch 4)") {
        CHECK_THAT(result, Catch::StartsWith("FAIL (timeout: acc4 stopped at its limit"));
      } else if (title == "full checkpointing, dropout 0.1") {
        CHECK_THAT(result, Catch::StartsWith("FAIL (reference: drop-none exited with 1"));
      } else if (title.rfind("CUDA libraries loaded at start", 0) == 0) {
        CHECK_THAT(result, Catch::StartsWith("SKIPPED (no CUDA: doctor says '"));
      } else if (title.rfind("Catch2 [cuda][", 0) == 0) {
        CHECK_THAT(result, Catch::StartsWith("SKIPPED (no CUDA: "));
      } else if (title.find("fp16") != std::string::npos || title.rfind("peak allocated", 0) == 0 ||
                 title.rfind("allocator snapshot", 0) == 0 ||
                 title.rfind("frugal generate speed", 0) == 0) {
        CHECK_THAT(result, Catch::StartsWith("SKIPPED (no CUDA"));
      } else {
        CHECK(result == "PASS");
      }
    }
    CHECK_THAT(summary, Catch::Contains("\n2 failed, 0 inconclusive, 7 skipped; total "));
    // Only the three files in $OUT; the logs (the hung run's among them) in the archive.
    std::set<std::string> files;
    for (const auto& e : fs::directory_iterator(out)) files.insert(e.path().filename().string());
    CHECK(files == std::set<std::string>{"check.log", "logs.tar.gz", "summary.md"});
    auto listing = must("tar -tzf " + test::quote((out / "logs.tar.gz").string()));
    CHECK_THAT(listing.out, Catch::Contains("logs/acc4.log"));
    CHECK_THAT(test::read_text(out / "check.log"), Catch::Contains("acc4: stopped after 3 s (limit)"));
  }
  {
    const auto [rows, summary] =
        dry_run(dir / "gpu-out-bench",
                "FRUGAL_GPU_STEPS=8 FRUGAL_GPU_INJECT='fail=python-full nojson=python-compile'",
                " --bench");
    std::map<std::string, std::string> result(rows.begin(), rows.end());
    CHECK(result["PyTorch eager, checkpointing none (the reference)"] == "MEASURED");
    CHECK(result["frugal, checkpointing none"] == "MEASURED");
    CHECK_THAT(result["frugal, checkpointing full"],
               Catch::StartsWith("FAIL (reference: python-full exited with 1; python-full.log)"));
    CHECK_THAT(result["frugal, optimizer offload"], Catch::Matches("PASS|FAIL"));
    CHECK(result["PyTorch torch.compile (with the time left)"] ==
          "FAIL (no figures: python-compile.json missing)");
  }
}
