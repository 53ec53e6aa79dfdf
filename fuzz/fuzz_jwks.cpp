// JWK sets (jwt.jwks) and EdDSA: an issuer's published keys are fetched from a URL, so the set's
// JSON is as untrusted as a token. Two input forms:
//  - "{set JSON}" optionally followed by "\n" and a header value ("Bearer eyJ..."): the set
//    through keys::parse_jwks, and when it yields keys, the token through keys::verify_jwt
//    against them (RS256, ES256 and EdDSA allowed);
//  - "!{header JSON}\n{payload JSON}": signed here with the fixture's Ed25519 key (kid "ed-1")
//    and checked against a set holding that key's public half, so that the fuzzer reaches
//    EdDSA's verification and the claim checks behind it by mutating plain JSON.

#include <openssl/evp.h>
#include <boost/json/parse.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "../tests/support/base64url.hpp"
#include "floodgate/keys/jwks.hpp"
#include "floodgate/keys/jwt.hpp"
#include "support.hpp"

namespace {

using namespace floodgate;
using Pkey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

struct Fixture {
  // A fixed private key: an input's signature is the same in every run, so a crash replays.
  Pkey key{[] {
             std::array<unsigned char, 32> seed{};
             for (std::size_t i = 0; i < seed.size(); ++i)
               seed[i] = static_cast<unsigned char>(i * 7 + 1);
             return EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(),
                                                 seed.size());
           }(),
           &EVP_PKEY_free};
  config::JwtSettings settings = [] {
    config::JwtSettings s;
    s.algorithms = {config::JwtAlgorithm::rs256, config::JwtAlgorithm::es256,
                    config::JwtAlgorithm::eddsa};
    return s;
  }();
  keys::KeySet own = [this] {
    std::array<unsigned char, 32> raw{};
    std::size_t len = raw.size();
    if (!key || EVP_PKEY_get_raw_public_key(key.get(), raw.data(), &len) != 1) __builtin_trap();
    auto x = floodgate::testing::base64url({reinterpret_cast<const char*>(raw.data()), len});
    auto r = keys::parse_jwks(R"({"keys":[{"kid":"ed-1","kty":"OKP","crv":"Ed25519","x":")" + x +
                              R"("}]})");
    if (!std::holds_alternative<keys::KeySet>(r)) __builtin_trap();
    return std::get<keys::KeySet>(std::move(r));
  }();
};

std::string b64url(std::string_view bytes) {
  return floodgate::testing::base64url(bytes);
}

std::string eddsa_token(const Fixture& fx, std::string_view header, std::string_view payload) {
  std::string input = b64url(header) + "." + b64url(payload);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  std::array<unsigned char, 64> sig{};
  std::size_t len = sig.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, fx.key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig.data(), &len,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1)
    __builtin_trap();
  return input + "." + b64url({reinterpret_cast<const char*>(sig.data()), len});
}

// The promises of jwt.hpp: claims only with success, and every error has a name.
keys::JwtResult checked(std::string_view value, const config::JwtSettings& s,
                        const keys::KeySet& set) {
  auto r = keys::verify_jwt(value, s, fuzz::kNowSeconds, &set);
  if (!r.ok() && !r.claims.empty()) __builtin_trap();
  if (std::string_view(keys::to_string(r.error)) == "unknown") __builtin_trap();
  return r;
}

// Whether our own header names EdDSA with our key's kid or none (then our signature verifies).
bool names_our_key(std::string_view header) {
  boost::system::error_code ec;
  auto v = boost::json::parse(header, ec);
  if (ec || !v.is_object()) return false;
  const auto& o = v.get_object();
  const auto* alg = o.if_contains("alg");
  const auto* kid = o.if_contains("kid");
  return alg && alg->is_string() && alg->get_string() == "EdDSA" &&
         (!kid || (kid->is_string() && kid->get_string() == "ed-1"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Fixture fx;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto nl = in.find('\n');
  if (in.starts_with('!')) {
    const auto header =
        in.substr(1, nl == std::string_view::npos ? std::string_view::npos : nl - 1);
    const auto payload = nl == std::string_view::npos ? std::string_view("{}") : in.substr(nl + 1);
    const auto token = eddsa_token(fx, header, payload);
    const auto r = checked(token, fx.settings, fx.own);
    // A token we signed with the set's key is never refused for its signature, unless it is
    // too long to be looked at.
    if (r.error == keys::JwtError::bad_signature && names_our_key(header) &&
        token.size() <= keys::max_jwt_length)
      __builtin_trap();
    return 0;
  }
  auto parsed = keys::parse_jwks(in.substr(0, nl));
  if (const auto* error = std::get_if<std::string>(&parsed)) {
    if (error->empty()) __builtin_trap();  // a refused set says why
    return 0;
  }
  const auto& set = std::get<keys::KeySet>(parsed);
  // A published set has a key, no more than are read, and every one usable.
  if (set.keys.empty() || set.keys.size() > keys::max_jwks_keys) __builtin_trap();
  for (const auto& k : set.keys)
    if (!k.key) __builtin_trap();
  if (nl != std::string_view::npos) checked(in.substr(nl + 1), fx.settings, set);
  return 0;
}
