#!/usr/bin/env bash
# tools/gpu/check.sh's fallback: builds frugal on the GPU machine against its python3's torch,
# from the source tree and the .deb files tools/gpu/fetch_deps.sh put in third_party_gpu/
# (that machine has no package registry). Several minutes on 16 cores: the bundle
# (tools/gpu/bundle.sh) is the usual way. Output: build-gpu/build/bin/{frugal,frugal_tests,
# frugal_dist_worker}; logs under OUT_DIR.
#   bash tools/gpu/build_from_source.sh PYTHON OUT_DIR
# FRUGAL_GPU_BUILD_YAML=1 builds yaml-cpp from source even where Debian's library loads.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
py=$1 OUT=$2
deps="$root/third_party_gpu"
# Prefixes and the build: git-ignored (/build-*/) and outside the carried folder.
work="$root/build-gpu"
say() { printf '[gpu-build] %s\n' "$*"; }
fail() { say "FAILED: $*"; exit 1; }
torch_prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)') || fail "$py has no torch"

# --- Dependencies from the carried .deb files ----------------------------------------------
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

# protoc (the TensorBoard event schema's code generator) runs from the prefix at build time.
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --- Build ----------------------------------------------------------------------------------
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
cmake --build "$build" -j "$(nproc)" --target frugal_cli frugal_tests frugal_dist_worker >"$OUT/build.log" 2>&1 ||
  { grep -m20 -B2 -A8 "error" "$OUT/build.log"; fail "build (see build.log)"; }
# The binaries find yaml-cpp through their build RUNPATH; the launcher needs nothing more.
say "built"
