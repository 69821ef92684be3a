#include "frugal/io/hash.h"

namespace frugal::io {

namespace {
constexpr std::uint64_t kPrime = 0x100000001b3ULL;
}  // namespace

std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t state) {
  for (unsigned char c : bytes) {
    state ^= c;
    state *= kPrime;
  }
  return state;
}

void fnv1a64_both(std::string_view bytes, std::uint64_t& first, std::uint64_t& second) {
  std::uint64_t a = first, b = second;  // in registers, not through the references
  for (unsigned char c : bytes) {
    a = (a ^ c) * kPrime;
    b = (b ^ c) * kPrime;
  }
  first = a;
  second = b;
}

std::string hex64(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[static_cast<size_t>(i)] = kDigits[value & 0xf];
  return out;
}

}  // namespace frugal::io
