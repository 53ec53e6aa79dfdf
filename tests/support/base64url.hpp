#pragma once
// base64url without padding (RFC 4648 section 5), for building JWTs in tests and fuzz
// targets. The product only decodes (src/keys/jwt.cpp); this encoder is written apart from it
// on purpose, so a test does not check the decoder against itself.

#include <cstdint>
#include <string>
#include <string_view>

namespace floodgate::testing {

inline constexpr std::string_view kBase64UrlAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

inline std::string base64url(std::string_view bytes) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kBase64UrlAlphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kBase64UrlAlphabet[(acc << (6 - bits)) & 63]);
  return out;
}

}  // namespace floodgate::testing
