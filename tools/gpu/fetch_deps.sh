#!/usr/bin/env bash
# For tools/gpu/check.sh --from-source (the bundle, tools/gpu/bundle.sh, is the usual way).
# Run HERE (the development machine, which has Debian's registry) before a GPU session: puts
# what the GPU machine's build needs and cannot download (it has no package registry) into
# third_party_gpu/ (git-ignored, ~15 MiB; pass it to the device tool as `carry`):
#   debs/  the header-only libraries (CLI11, nlohmann-json, Catch2, spdlog + fmt, Gloo's
#          headers for c10d's ProcessGroupGloo) and
#          yaml-cpp, as Debian .deb files, unpacked there with `dpkg -x` into a prefix
#   src/   yaml-cpp's Debian source, built there if that machine's glibc refuses the .deb
# Idempotent: a second run only checks.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dest="$root/third_party_gpu"
# (liburing: direct I/O through io_uring)
# (pcre2, sentencepiece, utf8proc: the tokenizers; their .pc files are found through
# CMAKE_PREFIX_PATH, which build_from_source.sh points at the unpacked prefix)
# (protobuf, its compiler protoc and Boost's headers: TensorBoard's event files; protoc runs
# there from the prefix, with its libraries through LD_LIBRARY_PATH; Boost is ~9 MiB)
debs=(libcli11-dev nlohmann-json3-dev catch2 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
      libyaml-cpp-dev libyaml-cpp0.7 libgloo-dev
      libpcre2-dev libpcre2-8-0 libsentencepiece-dev libsentencepiece0 libutf8proc-dev libutf8proc2
      libprotobuf-dev libprotobuf-lite32 libprotobuf32 libprotoc32 protobuf-compiler
      libboost1.74-dev liburing-dev liburing2)
mkdir -p "$dest/debs" "$dest/src"
cd "$dest/debs"
for p in "${debs[@]}"; do
  ls "${p}"_*.deb >/dev/null 2>&1 || apt-get download -qq "$p" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
  ls "${p}"_*.deb >/dev/null 2>&1 || { echo "fetch_deps: could not download $p" >&2; exit 1; }
done
cd "$dest/src"
if ! ls yaml-cpp_*.orig.tar.* >/dev/null 2>&1; then
  # deb-src through a private sources list: the machine's apt configuration is left alone.
  apt_dir=$(mktemp -d)
  trap 'rm -rf "$apt_dir"' EXIT
  mkdir -p "$apt_dir/lists/partial"
  codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
  echo "deb-src http://deb.debian.org/debian $codename main" >"$apt_dir/src.list"
  opts=(-o "Dir::Etc::SourceList=$apt_dir/src.list" -o Dir::Etc::SourceParts=/nonexistent
        -o "Dir::State::Lists=$apt_dir/lists")
  apt-get -qq "${opts[@]}" update 2>&1 | grep -v "unsandboxed" || true
  apt-get -qq "${opts[@]}" source --download-only yaml-cpp 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
  ls yaml-cpp_*.orig.tar.* >/dev/null 2>&1 || { echo "fetch_deps: no yaml-cpp source" >&2; exit 1; }
fi
du -sh "$dest" | awk '{print "third_party_gpu: " $1 " (carry it: third_party_gpu)"}'
