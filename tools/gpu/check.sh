#!/usr/bin/env bash
# The GPU machine's run (GUIDE.md §5): builds frugal there against its python3's torch, runs
# the CUDA tests and the GPT-2 124M bf16 benchmark, and prints a short table last. Under 8
# minutes on one H200 with 16 cores.
#
# Before a session, here: bash tools/gpu/fetch_deps.sh   (fills third_party_gpu/, ~2 MiB)
# Then, through the device tool:  bash tools/gpu/check.sh   with carry: ["third_party_gpu"]
# Results go to $OUT (default: gpu-out/): check.log and summary.md, and everything else (build
# logs, test reports, benchmark JSON and table) in logs.tar.gz, because the device tool brings
# back only a few files.
#
# Knobs: FRUGAL_GPU_PYTHON (default python3), FRUGAL_GPU_STEPS (benchmark steps, default 30),
# FRUGAL_GPU_BUILD_YAML=1 (build yaml-cpp from source even where Debian's library loads).
# On a machine without CUDA it still builds and runs the tests (the [cuda] ones say "no CUDA
# device" and pass) and skips the benchmark: that is how this script is checked on the CPU box.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/check.log") 2>&1
py=${FRUGAL_GPU_PYTHON:-python3}
deps="$root/third_party_gpu"
# Prefixes and the build: git-ignored (/build-*/) and outside the carried folder, which must
# stay small (the device tool carries at most 64 MiB).
work="$root/build-gpu"
t0=$(date +%s)
say() { printf '[gpu-check %4ss] %s\n' "$(($(date +%s) - t0))" "$*"; }
fail() { say "FAILED: $*"; echo "FAILED: $*" >"$OUT/summary.md"; exit 1; }
# On any exit: every file but check.log and summary.md into one archive.
pack() {
  (cd "$OUT" && files=$(ls | grep -v -x -e check.log -e summary.md -e logs.tar.gz) &&
    [ -n "$files" ] && tar -czf logs.tar.gz $files && rm -rf $files) || true
}
trap pack EXIT

# --- 1. The machine ---------------------------------------------------------------------------
say "machine"
grep -h PRETTY_NAME /etc/os-release 2>/dev/null || uname -a
ldd --version 2>&1 | head -1
g++ --version | head -1
cmake --version | head -1
(nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | tail -1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
echo "cores: $(nproc)"
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' ||
  fail "$py has no torch"
torch_prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')

# --- 2. Dependencies from the carried .deb files -------------------------------------------
[ -d "$deps/debs" ] || fail "third_party_gpu/debs missing: run tools/gpu/fetch_deps.sh here and carry third_party_gpu"
say "unpacking dependencies"
prefix="$work/prefix"    # everything but spdlog / fmt
logging="$work/logging"  # spdlog + fmt: seen only by frugal's logging unit (torch has its own fmt)
rm -rf "$prefix" "$logging"
mkdir -p "$prefix" "$logging"
unpack() {  # unpack DEB DIR: dpkg -x where there is dpkg, else ar + tar
  if command -v dpkg >/dev/null; then dpkg -x "$1" "$2"; return; fi
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && ar x "$1" && tar -xf data.tar.* -C "$2")
  rm -rf "$tmp"
}
for deb in "$deps"/debs/*.deb; do
  case $(basename "$deb") in
    libfmt* | libspdlog*) unpack "$deb" "$logging" ;;
    *) unpack "$deb" "$prefix" ;;
  esac
done
libdir=$(ls -d "$prefix"/usr/lib/*-linux-gnu | head -1)
yaml_so=$(ls "$libdir"/libyaml-cpp.so.0.* | head -1)
# Debian's yaml-cpp works where this glibc / libstdc++ accept it; otherwise build its source.
if [ "${FRUGAL_GPU_BUILD_YAML:-0}" != 1 ] &&
  "$py" -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$yaml_so" 2>/dev/null; then
  say "yaml-cpp: Debian's library loads here"
else
  say "yaml-cpp: Debian's library does not load here; building it from its Debian source"
  rm -rf "$libdir/cmake/yaml-cpp" "$libdir"/libyaml-cpp.so* "$prefix/usr/include/yaml-cpp"
  src="$work/yaml-cpp-src"
  rm -rf "$src" && mkdir -p "$src"
  tar -xf "$deps"/src/yaml-cpp_*.orig.tar.* -C "$src" --strip-components=1
  cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DYAML_BUILD_SHARED_LIBS=ON \
    -DYAML_CPP_BUILD_TESTS=OFF -DYAML_CPP_BUILD_TOOLS=OFF -DCMAKE_INSTALL_PREFIX="$prefix/usr" \
    -DCMAKE_INSTALL_LIBDIR="${libdir#"$prefix/usr/"}" >"$OUT/yaml-cpp-build.log" 2>&1 &&
    cmake --build "$src/build" -j "$(nproc)" >>"$OUT/yaml-cpp-build.log" 2>&1 &&
    cmake --install "$src/build" >>"$OUT/yaml-cpp-build.log" 2>&1 ||
    fail "yaml-cpp build (see yaml-cpp-build.log)"
fi

# --- 3. Build ---------------------------------------------------------------------------------
say "configuring"
build="$work/build"
nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr;$logging/usr" \
  -DTORCH_CUDA_ARCH_LIST=9.0 -DCMAKE_CUDA_COMPILER="$nvcc_path" \
  -DFRUGAL_HEADER_ONLY_LOGGING=ON -DFRUGAL_BUILD_BENCH=OFF \
  -DPython3_EXECUTABLE="$(command -v "$py")" >"$OUT/configure.log" 2>&1 ||
  { tail -30 "$OUT/configure.log"; fail "configure (see configure.log)"; }
say "building ($(nproc) jobs)"
cmake --build "$build" -j "$(nproc)" --target frugal_cli frugal_tests >"$OUT/build.log" 2>&1 ||
  { grep -m20 -B2 -A8 "error" "$OUT/build.log"; fail "build (see build.log)"; }
say "built"

# --- 4. The CUDA tests ------------------------------------------------------------------------
# [cuda]: fp16 + GradScaler, bf16, CUDA memory statistics, a whole `frugal train` run with
# checkpointing and resume on the GPU, checkpointing's CUDA generator replay, NCCL at world 1
# (collectives and a DDP step); plus the CPU strategy tests, which must still pass on this
# machine's build (not those that compare with Python: its python3 may lack their packages).
tests_ok=1
for tags in "[cuda]" "[checkpointing]~[python],[precision]~[python],[composition]~[python]"; do
  name=$(echo "$tags" | tr -dc 'a-z,' | tr ',' '-')
  say "tests $tags"
  (cd "$build" && timeout 300 ./bin/frugal_tests "$tags" -r junit -o "$OUT/tests-$name.xml") ||
    tests_ok=0
  grep -o 'tests="[0-9]*" failures="[0-9]*"\|failures="[0-9]*" .*tests="[0-9]*"' "$OUT/tests-$name.xml" | head -1
done
tests_line="CUDA tests: $([ $tests_ok = 1 ] && echo passed || echo FAILED) (reports: tests-*.xml)"

# --- 5. GPT-2 124M bf16 benchmark, frugal vs Python PyTorch ------------------------------------
bench_table="(no CUDA device: benchmark skipped)"
if "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  say "GPT-2 124M bf16 benchmark"
  if timeout 300 bash bench/gpu/run.sh "$build/bin/frugal" "$py" "$OUT" >"$OUT/bench.md" 2>"$OUT/bench.err"; then
    bench_table=$(cat "$OUT/bench.md")
  else
    tail -20 "$OUT/bench.err"
    bench_table="benchmark FAILED (see bench.err)"
  fi
fi

# --- 6. Summary, last -------------------------------------------------------------------------
{
  echo "## tools/gpu/check.sh, $(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  echo
  echo "$tests_line"
  echo
  echo "$bench_table"
  echo
  echo "total: $(($(date +%s) - t0)) s"
} | tee "$OUT/summary.md"
[ $tests_ok = 1 ]
