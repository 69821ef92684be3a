// frugal doctor reads a fake /proc + /sys tree: each finding's value and verdict follow the
// files, a badly set machine gets a warning with advice for every setting that hurts, a well
// set one none; missing files are findings, not errors. The CLI prints the same as JSON.
#include <catch2/catch.hpp>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <nlohmann/json.hpp>

#include "frugal/config/load.h"
#include "frugal/memory/doctor.h"
#include "frugal/memory/planner.h"
#include "support/cli.h"
#include "support/helpers.h"

using namespace frugal;
using frugal::memory::Verdict;

namespace {

struct FakeRoot {
  test::TempDir dir{"frugal-doctor"};
  void file(const std::string& rel, const std::string& text) {
    std::filesystem::create_directories((dir / rel).parent_path());
    test::write_text(dir / rel, text);
  }
};

// A machine set up against training: memory nearly full, swapping, eager swappiness, strict
// overcommit, a tiny reserve on a big host, no huge pages, 64 KiB of lockable memory, a 64 MiB
// /dev/shm, 4 cores.
void write_bad(FakeRoot& r) {
  r.file("proc/meminfo", "MemTotal:       268435456 kB\nMemFree:          1048576 kB\n"
                         "MemAvailable:    2097152 kB\nSwapTotal:       8388608 kB\n"
                         "SwapFree:        1048576 kB\n");
  r.file("proc/sys/vm/swappiness", "100\n");
  r.file("proc/sys/vm/overcommit_memory", "2\n");
  r.file("proc/sys/vm/min_free_kbytes", "11264\n");
  r.file("sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]\n");
  r.file("proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units\n"
                             "Max locked memory         65536                65536                bytes\n");
  r.file("proc/mounts", "proc /proc proc rw 0 0\ntmpfs /dev/shm tmpfs rw,nosuid,nodev,size=65536k 0 0\n");
  r.file("proc/cpuinfo", "processor\t: 0\nprocessor\t: 1\nprocessor\t: 2\nprocessor\t: 3\n");
}

void write_good(FakeRoot& r) {
  r.file("proc/meminfo", "MemTotal:       16777216 kB\nMemAvailable:   12582912 kB\n"
                         "SwapTotal:       4194304 kB\nSwapFree:        4194304 kB\n");
  r.file("proc/sys/vm/swappiness", "10\n");
  r.file("proc/sys/vm/overcommit_memory", "0\n");
  r.file("proc/sys/vm/min_free_kbytes", "67584\n");
  r.file("sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
  r.file("proc/self/limits", "Max locked memory         unlimited            unlimited            bytes\n");
  r.file("proc/mounts", "tmpfs /dev/shm tmpfs rw,size=8g 0 0\n");
  r.file("proc/cpuinfo", "processor\t: 0\nprocessor\t: 1\n");
}

std::map<std::string, memory::Finding> by_name(const std::vector<memory::Finding>& fs) {
  std::map<std::string, memory::Finding> out;
  for (const auto& f : fs) out[f.name] = f;
  return out;
}

}  // namespace

TEST_CASE("doctor: a machine set up against training gets a warning for each setting",
          "[unit][doctor]") {
  FakeRoot root;
  write_bad(root);
  memory::Probe probe;
  probe.omp_threads = 8;
  probe.env = {{"NCCL_P2P_DISABLE", "1"}, {"NCCL_DEBUG", "INFO"}};
  auto f = by_name(memory::diagnose(root.dir.path(), probe));
  CHECK(f.at("host memory").value == "2.0 GiB available of 256.0 GiB");
  CHECK(f.at("host memory").verdict == Verdict::warn);
  CHECK(f.at("swap").value == "7.0 GiB used of 8.0 GiB");
  CHECK(f.at("swap").verdict == Verdict::warn);
  CHECK(f.at("vm.swappiness").verdict == Verdict::warn);
  CHECK_THAT(f.at("vm.swappiness").advice, Catch::Contains("vm.swappiness=10"));
  CHECK(f.at("vm.overcommit_memory").verdict == Verdict::warn);
  CHECK(f.at("vm.min_free_kbytes").verdict == Verdict::info);
  CHECK_THAT(f.at("vm.min_free_kbytes").advice, Catch::Contains("vm.min_free_kbytes=268435"));
  CHECK(f.at("transparent huge pages").value == "never");
  CHECK(f.at("transparent huge pages").verdict == Verdict::warn);
  CHECK(f.at("locked memory limit").value == "0 MiB");
  CHECK(f.at("locked memory limit").verdict == Verdict::warn);
  CHECK(f.at("/dev/shm").value == "0.1 GiB");
  CHECK(f.at("/dev/shm").verdict == Verdict::warn);
  CHECK(f.at("CPU cores / threads").value == "4 cores, 8 OpenMP threads");
  CHECK(f.at("CPU cores / threads").verdict == Verdict::warn);
  CHECK(f.at("NCCL_P2P_DISABLE").verdict == Verdict::warn);
  CHECK(f.at("NCCL_DEBUG").verdict == Verdict::info);
  CHECK(f.at("GPUs").verdict == Verdict::info);
}

TEST_CASE("doctor: a well set machine has nothing to look at, missing files are findings",
          "[unit][doctor]") {
  FakeRoot root;
  write_good(root);
  memory::Probe probe;
  probe.omp_threads = 2;
  probe.gpus = {{"NVIDIA H200", 150ll << 30}};
  probe.cuda_runtime = "13.0";
  probe.cuda_driver = "13.0";
  const auto findings = memory::diagnose(root.dir.path(), probe);
  for (const auto& f : findings) {
    INFO(f.name << ": " << f.value << " " << f.advice);
    CHECK((f.verdict == Verdict::ok || f.verdict == Verdict::info));
    CHECK(f.verdict != Verdict::warn);
  }
  auto f = by_name(findings);
  CHECK(f.at("locked memory limit").value == "unlimited");
  CHECK(f.at("/dev/shm").value == "8.0 GiB");
  CHECK(f.at("GPU 0").value == "NVIDIA H200, 150.0 GiB (CUDA runtime 13.0, driver 13.0)");

  FakeRoot empty;
  auto none = by_name(memory::diagnose(empty.dir.path(), probe));
  CHECK(none.at("vm.swappiness").value == "unknown");
  CHECK(none.at("vm.swappiness").verdict == Verdict::info);
  CHECK_THAT(none.at("vm.swappiness").advice, Catch::Contains("could not read"));
}

TEST_CASE("frugal doctor prints its findings, and --json for machines", "[integration][doctor]") {
  FakeRoot root;
  write_bad(root);
  test::CommandResult r = test::frugal("doctor --json --root " + test::quote(root.dir.path().string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  // memory, swap, swappiness, overcommit, huge pages, locked memory, /dev/shm (this
  // process has no more threads than the fake 4 cores, and no NCCL_* variables here)
  CHECK(j.at("warnings").get<int>() == 7);
  bool found = false;
  for (const auto& f : j.at("findings")) {
    if (f.at("name") == "vm.overcommit_memory") {
      found = true;
      CHECK(f.at("verdict") == "warn");
      CHECK(f.at("value") == "2");
    }
  }
  CHECK(found);
  test::CommandResult text = test::frugal("doctor --root " + test::quote(root.dir.path().string()));
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("warn  vm.swappiness") && Catch::Contains("-> "));
}

TEST_CASE("frugal doctor --disk adds the folder's direct-I/O findings", "[integration][doctor]") {
  FakeRoot root;
  test::TempDir disk("frugal-doctor-disk");
  const std::string args = "doctor --json --root " + test::quote(root.dir.path().string()) +
                           " --disk " + test::quote(disk.path().string()) + " --disk-mib 4";
  test::CommandResult r = test::frugal(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& f : j.at("findings")) by_name[f.at("name").get<std::string>()] = f;
  const std::string prefix = "disk " + disk.path().string();
  REQUIRE(by_name.count(prefix + " I/O") == 1);
  CHECK(by_name.at(prefix + " I/O").at("value") == "io_uring, O_DIRECT");
  CHECK(by_name.at(prefix + " I/O").at("verdict") == "ok");
  CHECK_THAT(by_name.at(prefix + " write").at("value").get<std::string>(),
             Catch::Contains("GiB/s (4 MiB in 1024 KiB blocks, 8 in flight)"));
  CHECK(by_name.count(prefix + " read") == 1);
  CHECK(std::filesystem::is_empty(disk.path()));
  // The fallback is named, with its advice, when io_uring is not used.
  test::CommandResult forced = test::run_command("FRUGAL_IO_BACKEND=threads " +
                                                 test::quote(test::frugal_binary()) + " " + args);
  REQUIRE(forced.exit_code == 0);
  const nlohmann::json forced_json = nlohmann::json::parse(forced.out);
  int seen = 0;
  for (const auto& f : forced_json.at("findings")) {
    if (f.at("name") != prefix + " I/O") continue;
    CHECK(f.at("value") == "threads, O_DIRECT");
    ++seen;
  }
  CHECK(seen == 1);
  // With a config: the step time NVMe offload there would add, from the measured bandwidths
  // and the config's optimizer state (tiny-gpt: AdamW, 12 bytes per parameter).
  test::CommandResult with_config =
      test::frugal(args + " " + test::quote((test::source_dir() / "configs/tiny-gpt.yaml").string()));
  INFO(with_config.out << with_config.err);
  REQUIRE(with_config.exit_code == 0);
  std::string nvme;
  const nlohmann::json with_config_json = nlohmann::json::parse(with_config.out);
  for (const auto& f : with_config_json.at("findings")) {
    if (f.at("name") == "offload.optimizer nvme") nvme = f.at("value").get<std::string>();
  }
  CHECK_THAT(nvme, Catch::StartsWith("+") && Catch::Contains(" s per optimizer step: ") &&
                       Catch::Contains("GiB of fp32 masters and adamw state read and written"));
  const Config tiny = load_config((test::source_dir() / "configs/tiny-gpt.yaml").string());
  const memory::NvmeStepCost cost = memory::predict_nvme_step(tiny, 1e9, 5e8);
  CHECK(cost.state_bytes == 12 * memory::model_shape(tiny).params);
  CHECK(cost.seconds == Approx(static_cast<double>(cost.state_bytes) * (1e-9 + 2e-9)));
  test::CommandResult no_disk = test::frugal("doctor configs/tiny-gpt.yaml");
  CHECK(no_disk.exit_code == 2);
  CHECK_THAT(no_disk.err, Catch::Contains("a config is read with --disk DIR"));
  // A folder that is not there: one line, exit 2.
  test::CommandResult missing = test::frugal("doctor --disk " + test::quote((disk / "absent").string()));
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("is not a folder"));
}

namespace test_doctor {

// Runs `command_line` through /bin/sh in a child under a seccomp policy that refuses
// io_uring_setup with EPERM (as a container's default policy may), inherited across exec; the
// exit status, or -1 when it had to be killed after `timeout_s`.
int run_without_io_uring(const std::string& command_line, int timeout_s) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
      ::_exit(126);
    }
    ::execl("/bin/sh", "sh", "-c", command_line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace test_doctor

TEST_CASE("where a seccomp policy refuses io_uring direct I/O falls back to threads and says so once",
          "[integration][doctor][io]") {
  test::TempDir dir("frugal-no-uring");
  std::filesystem::create_directories(dir / "disk");
  const std::string out = (dir / "out.json").string(), err = (dir / "err.txt").string();
  const int rc = test_doctor::run_without_io_uring(
      test::quote(test::frugal_binary()) + " doctor --json --disk " +
          test::quote((dir / "disk").string()) + " --disk-mib 4 > " + test::quote(out) + " 2> " +
          test::quote(err),
      120);
  const std::string said = test_doctor::read_text(err);
  INFO(said);
  REQUIRE(rc == 0);
  // The measurement ran on the pool of threads, and the log says why, once (the doctor makes
  // several engines: the write, the read and the mixed pass).
  const nlohmann::json j = nlohmann::json::parse(test_doctor::read_text(out));
  int seen = 0;
  for (const auto& f : j.at("findings")) {
    if (f.at("name") != "disk " + (dir / "disk").string() + " I/O") continue;
    CHECK(f.at("value") == "threads, O_DIRECT");
    ++seen;
  }
  CHECK(seen == 1);
  const std::string line = "direct I/O: io_uring refused (io_uring_setup: Operation not permitted)";
  REQUIRE_THAT(said, Catch::Contains(line));
  CHECK(said.find(line) == said.rfind(line));
}
