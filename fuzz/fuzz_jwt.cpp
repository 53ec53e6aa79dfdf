// Bearer tokens through keys::verify_jwt with every algorithm allowed (HS256 secret, RSA and EC
// P-256 public keys), with and without issuer/audience checks. Two input forms:
//  - a header value as a client sends it ("Bearer eyJ..."), checked as is;
//  - "{header JSON}\n{payload JSON}" (starts with '{'): encoded and HS256-signed here with the
//    fixture's secret, so that the fuzzer reaches the claim checks behind the signature by
//    mutating plain JSON instead of base64url it cannot sign.

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <boost/json/parse.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../tests/support/base64url.hpp"
#include "floodgate/keys/jwt.hpp"
#include "support.hpp"

namespace {

using namespace floodgate;

constexpr const char* kSecret = "fuzz-hs256-secret-0123456789abcdef";

std::string fixture_yaml() {
  std::string keys = FLOODGATE_SOURCE_DIR "/config/examples/keys/";
  return R"(
server: { listen: [127.0.0.1:8080] }
upstreams: { origin: { url: http://127.0.0.1:9000 } }
routes: [ { name: all, match: { path_prefix: / }, upstream: origin } ]
jwt:
  algorithms: [HS256, RS256, ES256]
  hs256_secret: )" +
         std::string(kSecret) + R"(
  public_keys: [")" +
         keys + R"(jwt-rs256.pub.pem", ")" + keys + R"(jwt-es256.pub.pem"]
  issuer: https://issuer.example
  audience: api
  leeway: 30s
)";
}

struct Fixture {
  config::JwtSettings strict = *fuzz::load_fixture(fixture_yaml(), "fuzz-jwt.yaml")->jwt;
  config::JwtSettings lax = [this] {
    auto s = strict;
    s.issuer.clear();
    s.audience.clear();
    return s;
  }();
};

std::string b64url(std::string_view bytes) {
  return floodgate::testing::base64url(bytes);
}

std::string hs256_token(std::string_view header, std::string_view payload) {
  std::string input = b64url(header) + "." + b64url(payload);
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), kSecret, static_cast<int>(std::string_view(kSecret).size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac.data(), &len);
  return input + "." + b64url({reinterpret_cast<const char*>(mac.data()), len});
}

// The promises of jwt.hpp: claims only with success, and every error has a name.
keys::JwtResult checked(std::string_view value, const config::JwtSettings& s) {
  auto r = keys::verify_jwt(value, s, fuzz::kNowSeconds);
  if (!r.ok() && !r.claims.empty()) __builtin_trap();
  if (std::string_view(keys::to_string(r.error)) == "unknown") __builtin_trap();
  if (r.ok())
    for (const char* name : {"sub", "tier", "tenant", "exp", "aud", "nested"})
      keys::claim_text(r.claims, name);
  return r;
}

// Whether our own header names HS256 (then our signature must be accepted).
bool says_hs256(std::string_view header) {
  boost::system::error_code ec;
  auto v = boost::json::parse(header, ec);
  if (ec || !v.is_object()) return false;
  const auto* alg = v.get_object().if_contains("alg");
  return alg && alg->is_string() && alg->get_string() == "HS256";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Fixture fx;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (!in.starts_with('{')) {
    checked(in, fx.strict);
    checked(in, fx.lax);
    return 0;
  }
  auto nl = in.find('\n');
  std::string_view header = in.substr(0, nl);
  std::string_view payload = nl == std::string_view::npos ? "{}" : in.substr(nl + 1);
  auto token = hs256_token(header, payload);
  checked(token, fx.strict);
  auto lax = checked(token, fx.lax);
  // A token we signed with the right secret is never refused for its signature, unless it
  // is too long to be looked at.
  if (lax.error == keys::JwtError::bad_signature && says_hs256(header) &&
      token.size() <= keys::max_jwt_length)
    __builtin_trap();
  return 0;
}
