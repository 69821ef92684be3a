#!/usr/bin/env bash
# Everything frugal needs, from a bare Debian machine to a built tree: Debian packages, the
# pinned torch wheel in a venv, a CMake configure and build (all targets, or the one named by
# FRUGAL_BUILD_TARGET). Idempotent: a second run only
# checks and rebuilds what changed (seconds).
#
# The venv is heavy (the CUDA torch wheel, ~3 GiB), so it lives in a cache folder keyed by the
# pins and .venv links to it: a second clone on the same machine sets up in seconds.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

say() { printf '[bootstrap] %s\n' "$*"; }

# --- Debian packages -------------------------------------------------------------------------
# (chromium: the test that renders `frugal report`'s page headless)
# (patchelf: tools/gpu/bundle.sh, the GPU bundle, built and checked by the test suite)
# (libpcre2-dev: the tokenizers' pre-tokenizer patterns)
# (libsentencepiece-dev: SentencePiece .model tokenizers, Llama 2 / Mistral / T5 style)
# (libutf8proc-dev: Unicode normalization (NFC, ...) for tokenizer.json normalizers)
# (liburing-dev: direct I/O through io_uring, for NVMe offload and asynchronous checkpoints)
# (libprotobuf-dev, protobuf-compiler, libboost-dev: TensorBoard event files: protocol buffers,
#  and Boost.CRC's CRC32C for their record framing)
debs=(
  g++ cmake ninja-build ccache pkg-config python3-venv patchelf
  libyaml-cpp-dev libpcre2-dev libspdlog-dev libfmt-dev catch2 libcli11-dev nlohmann-json3-dev libgloo-dev
  libsentencepiece-dev libutf8proc-dev libprotobuf-dev protobuf-compiler libboost-dev liburing-dev
  libopenmpi-dev openmpi-bin
  fortunes fortunes-min
  chromium
)
# (clang-14, libclang-rt-14-dev: libFuzzer and clang's sanitizer runtimes for the fuzz targets,
#  tools/fuzz.sh, which the test suite runs briefly)
if [ "${FRUGAL_TEST_DEPS:-0}" = 1 ] || [ "${FRUGAL_FUZZ_DEPS:-0}" = 1 ]; then
  debs+=(clang-14 libclang-rt-14-dev)
fi
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# python3-venv is only needed where python3 is Debian's; a pyenv python has venv built in.
if [ ${#missing[@]} -gt 0 ] && [ "${missing[*]}" != "python3-venv" ]; then
  say "installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Python venv with the pinned torch -------------------------------------------------------
torch_pin=$(sed -n 's/^torch==//p' requirements.txt)
req_hash=$(sha256sum requirements.txt | cut -c1-12)
cache="${FRUGAL_CACHE:-$HOME/.cache/frugal}"
venv="$cache/venv-torch${torch_pin}"
mkdir -p "$cache"
if [ ! -f "$venv/.frugal-$req_hash" ]; then
  say "creating $venv (torch==$torch_pin; several minutes on a fresh machine)"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --progress-bar off -r requirements.txt
  touch "$venv/.frugal-$req_hash"
fi
# Test-only packages (transformers), for tools/test.sh and the benchmarks: FRUGAL_TEST_DEPS=1.
if [ "${FRUGAL_TEST_DEPS:-0}" = 1 ]; then
  test_hash=$(cat requirements.txt requirements-test.txt | sha256sum | cut -c1-12)
  if [ ! -f "$venv/.frugal-test-$test_hash" ]; then
    say "installing the test-only Python packages (requirements-test.txt)"
    "$venv/bin/pip" install -q --disable-pip-version-check --progress-bar off \
      -r requirements-test.txt -c requirements.txt
    touch "$venv/.frugal-test-$test_hash"
  fi
fi
if [ "$(readlink .venv 2>/dev/null)" != "$venv" ]; then
  rm -f .venv
  ln -s "$venv" .venv
fi

# --- Configure and build ---------------------------------------------------------------------
# FRUGAL_BUILD_TARGET=none: set-up only (the instrumented builds configure their own folders).
[ "${FRUGAL_BUILD_TARGET:-all}" = none ] && exit 0
build_type="${FRUGAL_BUILD_TYPE:-Release}"
if [ ! -f build/build.ninja ]; then
  say "configuring build/ ($build_type)"
  torch_prefix=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cmake -S . -B build -G Ninja \
    -DCMAKE_BUILD_TYPE="$build_type" \
    -DCMAKE_PREFIX_PATH="$torch_prefix" \
    -DPython3_EXECUTABLE="$root/.venv/bin/python" \
    -DTORCH_CUDA_ARCH_LIST=9.0 >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
  rm -f build-configure.log
fi
# FRUGAL_BUILD_TARGET: one target only (tools/quickstart.sh builds the CLI, not the tests).
target="${FRUGAL_BUILD_TARGET:-all}"
say "building $target (ninja, $(nproc) jobs)"
cmake --build build --parallel "$(nproc)" --target "$target"
