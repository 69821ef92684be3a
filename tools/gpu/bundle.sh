#!/usr/bin/env bash
# Builds, here, the folder the GPU machine runs from, so that it compiles nothing there (a GPU
# machine is lent for minutes): frugal's CLI, the test binary, the distributed test worker,
# libfrugal.so and every shared library they need except torch's and glibc's, plus the configs,
# scripts and reference programs tools/gpu/check.sh reads. torch is left out: the GPU machine's
# python3 has the same wheel (2.11.0+cu130), and the launcher `run` finds its lib/ through
# `python3 -c 'import torch'` on every call, so no path of this machine is baked in (the
# binaries' RUNPATH is $ORIGIN/../lib alone).
#
#   bash tools/gpu/bundle.sh [-o DIR] [--build-dir DIR] [--no-deps]
#     -o DIR          where the bundle goes (default: gpu-bundle/, git-ignored); replaced whole
#     --build-dir DIR take the binaries from this build, as they are (default: run
#                     tools/bootstrap.sh and take build/)
#     --no-deps       leave out third_party_gpu/ (the source-build fallback's libraries, fetched
#                     from Debian's registry by tools/gpu/fetch_deps.sh): the test suite's bundle
# Then, through the device tool: bash gpu-bundle/check.sh   with carry: ["gpu-bundle"]
# The bundle is checked here by tests/integration/test_gpu_bundle.cpp (relocated, with torch
# found through another venv).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out="$root/gpu-bundle"
build=""
with_deps=1
while [ $# -gt 0 ]; do
  case $1 in
    -o) out=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --no-deps) with_deps=0; shift ;;
    *) echo "bundle.sh: unknown argument '$1' (expected -o DIR, --build-dir DIR or --no-deps)" >&2; exit 2 ;;
  esac
done
say() { printf '[bundle] %s\n' "$*"; }
limit_mib=48  # what the device tool carries is 64 MiB at most, with the working tree

if [ -z "$build" ]; then
  bash "$root/tools/bootstrap.sh"
  build="$root/build"
fi
build=$(cd "$build" && pwd)
for f in bin/frugal bin/frugal_tests bin/frugal_dist_worker lib/libfrugal.so \
         lib/libfrugal_tensorboard_events.so lib/libfrugal_cuda.so; do
  [ -e "$build/$f" ] || { echo "bundle.sh: $build/$f missing (build it first)" >&2; exit 1; }
done
for tool in patchelf strip readelf objdump; do
  command -v $tool >/dev/null || { echo "bundle.sh: '$tool' not found (tools/bootstrap.sh installs it)" >&2; exit 1; }
done
py=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
[ -x "$py" ] || py="$root/.venv/bin/python"
# (where torch is and its version, without importing it: seconds on a small machine)
site=$("$py" -c 'import importlib.util as u, os; print(os.path.dirname(os.path.dirname(u.find_spec("torch").origin)))')

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
out=$(cd "$out" && pwd)

# --- 1. frugal's binaries: stripped, RUNPATH $ORIGIN/../lib only ------------------------------
cp "$build"/bin/frugal "$build"/bin/frugal_tests "$build"/bin/frugal_dist_worker "$out/bin/"
cp -L "$build/lib/libfrugal.so" "$out/lib/libfrugal.so"
soname=$(readelf -d "$out/lib/libfrugal.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -n "$soname" ] && [ "$soname" != libfrugal.so ] && ln -s libfrugal.so "$out/lib/$soname"
# TensorBoard's event encoding and the CUDA runtime (torch's CUDA libraries, NCCL): loaded by
# libfrugal from its own folder (dlopen), so no ldd finds them.
cp -L "$build/lib/libfrugal_tensorboard_events.so" "$build/lib/libfrugal_cuda.so" "$out/lib/"
frugal_elves=("$out"/bin/* "$out/lib/libfrugal.so" "$out/lib/libfrugal_tensorboard_events.so"
  "$out/lib/libfrugal_cuda.so")
strip --strip-unneeded "${frugal_elves[@]}"
for f in "${frugal_elves[@]}"; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done

# --- 2. The shared libraries they need, except torch's (and the CUDA libraries beside it in
#        site-packages) and glibc's, which the GPU machine has ----------------------------------
torch_libs="$site/torch/lib"
nvidia_libs=$(find "$site/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | tr '\n' ':')
glibc='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libcuda)\.so'
for f in "${frugal_elves[@]}"; do
  LD_LIBRARY_PATH="$out/lib:$torch_libs:$nvidia_libs" ldd "$f"
done | awk '$2 == "=>" { print $1, $3 }' | sort -u | while read -r name path; do
  [ "$path" = "not" ] && { echo "bundle.sh: $name not found" >&2; exit 1; }
  case $path in "$site"/* | "$out"/*) continue ;; esac
  echo "$name" | grep -Eq "$glibc" && continue
  # One the wheel ships too (libcudart from the CUDA toolkit): the wheel's is used there.
  for d in $(echo "$torch_libs:$nvidia_libs" | tr ':' ' '); do [ -e "$d/$name" ] && continue 2; done
  # The C++ runtime apart: the launcher uses it only where the machine's own is older than
  # frugal's binaries need (this one needs this machine's newer glibc).
  dest="$out/lib"
  case $name in libstdc++.so.* | libgcc_s.so.*) dest="$out/lib/cxx" ;; esac
  mkdir -p "$dest"
  cp -L "$path" "$dest/$name"
  strip --strip-unneeded "$dest/$name"
  patchelf --set-rpath '$ORIGIN' "$dest/$name"
done

# --- 3. What the GPU check reads, in the source tree's layout ---------------------------------
copy() { for p in "$@"; do mkdir -p "$out/$(dirname "$p")"; cp -r "$root/$p" "$out/$p"; done; }
copy configs tests/python bench/gpu bench/python tools/gpu/check.sh tools/gpu/lib.sh tools/gpu/reference
cp "$root/tools/gpu/run" "$out/run"
ln -s tools/gpu/check.sh "$out/check.sh"

# --- 3b. What the source-build fallback needs (check.sh takes it when the bundle's frugal does
#         not start there): the source tree as it is here, and the .deb files of the libraries
#         that machine lacks (tools/gpu/fetch_deps.sh; --no-deps leaves them out) -------------
(cd "$root" && { git ls-files; git ls-files --others --exclude-standard; } | sort -u |
  while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done |
  tar -czf "$out/source.tar.gz" --files-from=-)
deps="left out (--no-deps)"
if [ $with_deps = 1 ]; then
  bash "$root/tools/gpu/fetch_deps.sh"
  cp -r "$root/third_party_gpu" "$out/third_party_gpu"
  deps="third_party_gpu/ ($(du -sh "$out/third_party_gpu" | cut -f1))"
fi

# --- 4. The manifest: what it was built from and the oldest glibc it runs on -------------------
newest() {  # newest PREFIX FILES...: the newest symbol version PREFIX_x.y.z the files need
  local prefix=$1; shift
  for f in "$@"; do objdump -T "$f" 2>/dev/null; done | grep -o "(${prefix}_[0-9.]*)" |
    tr -d '()' | sed "s/${prefix}_//" | sort -V -u | tail -1
}
glibc_needed=$(newest GLIBC "$out"/bin/* "$out"/lib/*.so*)
glibcxx_needed=$(newest GLIBCXX "$out"/bin/* "$out"/lib/*.so*)
cxx_glibc_needed=$(newest GLIBC "$out"/lib/cxx/*)
size_kib=$(du -sk "$out" | cut -f1)
{
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "torch: $("$py" -c 'import importlib.metadata as m; print(m.version("torch"))')"
  echo "glibc needed: $glibc_needed"
  echo "GLIBCXX needed: $glibcxx_needed (lib/cxx/ has one, for glibc $cxx_glibc_needed or newer)"
  echo "size: $((size_kib / 1024)) MiB"
  echo "source-build fallback: source.tar.gz; libraries: $deps"
  echo "libraries: $(cd "$out/lib" && find . -name '*.so*' | sed 's|^\./||' | sort | tr '\n' ' ')"
} >"$out/MANIFEST"
cat "$out/MANIFEST" | sed 's/^/[bundle] /'
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "bundle.sh: the bundle is $((size_kib / 1024)) MiB, over the ${limit_mib} MiB limit" >&2
  exit 1
fi
say "ready: $out (device tool: command 'bash ${out#"$root/"}/check.sh', carry ['${out#"$root/"}'])"
