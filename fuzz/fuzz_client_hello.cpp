// A TLS ClientHello as a client sends it (the handshake message OpenSSL hands the message
// callback) through tls::parse_client_hello and the JA4/JA3 computation: every byte comes from
// the client before any authentication, so nothing may read out of bounds, loop or throw.
// Seeds: Chrome's and Firefox's hellos (tests/unit/fingerprint_test.cpp) and cut ones.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/tls/fingerprint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace floodgate::tls;
  auto hello = parse_client_hello(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!hello) return 0;
  const auto f = fingerprints_of(*hello);
  // JA4's shape holds whatever the hello: three parts, 10 + 12 + 12 characters.
  if (f.ja4.size() != 36 || f.ja4[10] != '_' || f.ja4[23] != '_' || f.ja3.size() != 32)
    __builtin_trap();
  return 0;
}
