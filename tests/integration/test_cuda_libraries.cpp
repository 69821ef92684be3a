// torch's CUDA libraries come with libfrugal_cuda.so, which libfrugal loads as it starts only
// where the machine has an NVIDIA driver or FRUGAL_CUDA=1 asks (FRUGAL_CUDA=0: never): this
// process maps them exactly then. `frugal doctor` says which; loaded, it answers through torch's
// CUDA hooks (the runtime's version, which torch's stand-in for them cannot give), so the
// libraries registered themselves as when linked. A libfrugal_cuda.so that cannot be loaded is
// a bad finding naming the file, and the CUDA device's error says why. Training on the CPU gives
// the same losses with the libraries loaded or not. Without them, a process ends without
// libtorch's static destructors (frugal::exit_process); with them, normally.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/cli.h"
#include "support/helpers.h"

using namespace frugal;
using nlohmann::json;
namespace fs = std::filesystem;

namespace test_cuda_libraries {

bool mapped(const std::string& file_name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.size() > file_name.size() + 1 &&
        line.compare(line.size() - file_name.size() - 1, std::string::npos, "/" + file_name) == 0) {
      return true;
    }
  }
  return false;
}

bool driver_present() {
  return access("/proc/driver/nvidia/version", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0;
}

// `frugal doctor --json`'s "CUDA libraries" finding, run with `env` before the command.
json finding(const std::string& env) {
  test::TempDir root("frugal-cuda-doctor");  // an empty /proc + /sys: only the process's findings
  const auto r = test::run_command("env " + env + " " + test::quote(test::frugal_binary()) +
                                   " doctor --json --root " + test::quote(root.path().string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const json doctor = json::parse(r.out);
  for (const auto& f : doctor.at("findings")) {
    if (f.at("name") == "CUDA libraries") return f;
  }
  FAIL("no 'CUDA libraries' finding");
  return {};
}

std::string value(const json& f) { return f.at("value").get<std::string>(); }

}  // namespace test_cuda_libraries

using namespace test_cuda_libraries;

TEST_CASE("cuda libraries: loaded where a driver is or FRUGAL_CUDA=1 asks, never with 0",
          "[integration][cuda_libraries]") {
  const char* setting = std::getenv("FRUGAL_CUDA");
  const std::string asked = setting == nullptr ? "" : setting;
  const bool expected = asked == "1" || (asked != "0" && driver_present());
  INFO("FRUGAL_CUDA='" << asked << "', NVIDIA driver: " << driver_present());
  CHECK(mapped("libtorch_cuda.so") == expected);
  CHECK(mapped("libfrugal_cuda.so") == expected);
  CHECK(mapped("libtorch_cpu.so"));

  const json on = finding("FRUGAL_CUDA=1");
  CHECK(on.at("verdict") == "ok");
  CHECK_THAT(value(on), Catch::StartsWith("loaded from '") &&
                            Catch::Contains("/libfrugal_cuda.so', CUDA runtime "));
  CHECK_THAT(value(on), Catch::Matches(".*CUDA runtime [1-9][0-9]*\\.[0-9]"));

  const json off = finding("FRUGAL_CUDA=0");
  CHECK(off.at("verdict") == "info");
  CHECK(value(off) == "not loaded (FRUGAL_CUDA=0)");

  const json plain = finding("-u FRUGAL_CUDA");
  if (driver_present()) {
    CHECK_THAT(value(plain), Catch::StartsWith("loaded from '"));
  } else {
    CHECK(plain.at("verdict") == "info");
    CHECK_THAT(value(plain), Catch::StartsWith("not loaded: no NVIDIA driver (neither "
                                               "/proc/driver/nvidia nor /dev/nvidiactl"));
  }
}

TEST_CASE("cuda libraries: one that cannot be loaded is a bad finding, and the device says why",
          "[integration][cuda_libraries]") {
  // libfrugal found through a folder of its own (LD_LIBRARY_PATH comes before the binary's
  // RUNPATH), where no libfrugal_cuda.so lies beside it.
  test::TempDir dir("frugal-cuda-missing");
  int linked = 0;
  for (const auto& e : fs::directory_iterator(test::binary_dir() / "lib")) {
    if (e.path().filename().string().rfind("libfrugal.so", 0) != 0) continue;
    fs::create_symlink(fs::canonical(e.path()), dir / e.path().filename().string());
    ++linked;
  }
  REQUIRE(linked > 0);
  const std::string env = "FRUGAL_CUDA=1 LD_LIBRARY_PATH=" + test::quote(dir.path().string()) +
                          "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}";
  const json f = finding(env);
  CHECK(f.at("verdict") == "bad");
  CHECK_THAT(value(f), Catch::StartsWith("not loaded: cannot load '" +
                                         (dir / "libfrugal_cuda.so").string() + "': "));
  CHECK_THAT(f.at("advice").get<std::string>(), Catch::Contains("libfrugal_cuda.so"));

  test::TempDir runs("frugal-cuda-missing-runs");
  test::write_text(runs / "tiny.yaml", test::tiny_gpt_yaml(runs.path().string(), "cuda", 2));
  const auto r = test::run_command("env " + env + " " + test::quote(test::frugal_binary()) +
                                   " train " + test::quote((runs / "tiny.yaml").string()) +
                                   " --set run.device=cuda");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "frugal: error: run.device: 'cuda' asked for, but this process sees no CUDA device (use "
                 "auto or cpu; frugal's CUDA libraries are not loaded: cannot load '" +
                     (dir / "libfrugal_cuda.so").string() + "': " +
                     (dir / "libfrugal_cuda.so").string() +
                     ": cannot open shared object file: No such file or directory)\n");
}

TEST_CASE("cuda libraries: a CPU run trains alike with torch's CUDA libraries loaded",
          "[integration][cuda_libraries]") {
  test::TempDir runs("frugal-cuda-loaded-runs");
  auto losses = [&](const std::string& name, const std::string& env) {
    test::write_text(runs / (name + ".yaml"), test::tiny_gpt_yaml(runs.path().string(), name, 4));
    const auto r = test::run_command("env " + env + " " + test::quote(test::frugal_binary()) +
                                     " train " + test::quote((runs / (name + ".yaml")).string()) +
                                     " --set run.device=cpu");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    std::vector<double> out;
    std::istringstream lines(test::read_text(runs / name / "metrics.jsonl"));
    for (std::string line; std::getline(lines, line);) {
      const json j = json::parse(line);
      if (j.contains("loss")) out.push_back(j.at("loss").get<double>());
    }
    return out;
  };
  const auto loaded = losses("loaded", "FRUGAL_CUDA=1");
  const auto plain = losses("plain", "FRUGAL_CUDA=0");
  REQUIRE(loaded.size() == 4);
  CHECK(loaded == plain);
}

TEST_CASE("cuda libraries: a process ends without libtorch's destructors unless CUDA is loaded",
          "[integration][cuda_libraries][process_exit]") {
  // frugal::exit_process: the dynamic loader's log (LD_DEBUG=files) names each library whose
  // destructors run at exit ("calling fini"); a pipe makes stdout fully buffered, so the
  // version line arrives only if it was flushed before the process ended.
  auto ended = [](const std::string& env) {
    const auto r = test::run_command("env " + env + " LD_DEBUG=files " +
                                     test::quote(test::frugal_binary()) + " --version | cat");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "frugal " FRUGAL_PROJECT_VERSION "\n");
    return r.err;
  };
  const std::string plain = ended("FRUGAL_CUDA=0");
  CHECK(plain.find("calling init: ") != std::string::npos);  // the log is there
  CHECK(plain.find("calling fini: ") == std::string::npos);
  // With the CUDA libraries, the normal exit: their teardown and profilers' flush run.
  std::istringstream cuda(ended("FRUGAL_CUDA=1"));
  bool torch_fini = false;
  for (std::string line; std::getline(cuda, line);) {
    torch_fini = torch_fini || (line.find("calling fini: ") != std::string::npos &&
                                line.find("/libtorch_cpu.so") != std::string::npos);
  }
  CHECK(torch_fini);
}
