#pragma once
// A fast non-cryptographic 128-bit hash: 8-byte words, multiply and mix, a murmur3-style
// finaliser (every input bit reaches every output bit). Only for text an attacker cannot aim
// at a collision: store keys (their caller part is already a keyed HMAC) and the offline
// replay's caller hashes.

#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

namespace floodgate::keys {

inline std::uint64_t mix64(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

// 128 bits in one pass: two lanes with their own seeds.
inline std::pair<std::uint64_t, std::uint64_t> word_hash128(std::string_view s,
                                                            std::uint64_t seed_a,
                                                            std::uint64_t seed_b) {
  const std::uint64_t length = s.size() * 0x9E3779B97F4A7C15ULL;
  std::uint64_t a = seed_a ^ length, b = seed_b ^ length;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t k;
    std::memcpy(&k, s.data() + i, 8);
    a = mix64(a ^ k) * 0x9E3779B97F4A7C15ULL;
    b = mix64(b ^ k) * 0xC2B2AE3D27D4EB4FULL;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  tail ^= static_cast<std::uint64_t>(s.size() - i) << 56;
  return {mix64(a ^ tail), mix64(b ^ tail)};
}

}  // namespace floodgate::keys
