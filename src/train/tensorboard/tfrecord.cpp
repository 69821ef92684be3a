#include "train/tensorboard/tfrecord.h"

#include <boost/crc.hpp>

#include <cstdint>
#include <cstring>

#include "frugal/train/tensorboard.h"

namespace frugal {

// Boost.CRC set up as CRC-32C: the Castagnoli polynomial, reflected in and out, initial and
// final XOR all ones (Debian has no libcrc32c). Reflected tables make it byte-at-a-time;
// event records are small (a step's scalars), so no hardware CRC is needed.
uint32_t crc32c(std::string_view bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

namespace tfrecord {
namespace {

// Little-endian, whatever the host's order.
template <class T>
void put_le(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

template <class T>
T get_le(const char* p) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<T>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return value;
}

}  // namespace

std::string frame(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le<uint64_t>(out, data.size());
  put_le<uint32_t>(out, masked_crc32c(out));
  out.append(data);
  put_le<uint32_t>(out, masked_crc32c(data));
  return out;
}

std::vector<std::string> records(std::string_view bytes) {
  std::vector<std::string> out;
  size_t at = 0;
  while (bytes.size() - at >= 16) {
    const std::string_view header = bytes.substr(at, 8);
    if (get_le<uint32_t>(bytes.data() + at + 8) != masked_crc32c(header)) break;
    const uint64_t length = get_le<uint64_t>(bytes.data() + at);
    if (length > bytes.size() - at - 16) break;
    const std::string_view data = bytes.substr(at + 12, length);
    if (get_le<uint32_t>(bytes.data() + at + 12 + length) != masked_crc32c(data)) break;
    out.emplace_back(data);
    at += 16 + length;
  }
  return out;
}

}  // namespace tfrecord
}  // namespace frugal
