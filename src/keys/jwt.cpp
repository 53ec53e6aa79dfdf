// JWS compact tokens: strict base64url, an allow-list of algorithms, one key kind per algorithm,
// signature before payload, then exp / nbf / iss / aud.
#include "floodgate/keys/jwt.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "floodgate/ascii.hpp"
#include "floodgate/keys/jwks.hpp"
#include "openssl_free.hpp"

namespace floodgate::keys {
namespace {

using config::JwtAlgorithm;
using Bytes = std::vector<unsigned char>;

int b64url_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

std::string_view as_text(const Bytes& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::optional<boost::json::object> parse_object(const Bytes& text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(as_text(text), ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.get_object());
}

std::optional<JwtAlgorithm> algorithm_named(std::string_view name) {
  if (name == "HS256") return JwtAlgorithm::hs256;
  if (name == "RS256") return JwtAlgorithm::rs256;
  if (name == "ES256") return JwtAlgorithm::es256;
  if (name == "EdDSA") return JwtAlgorithm::eddsa;
  return std::nullopt;
}

bool verify_hs256(std::string_view input, const Bytes& sig, const std::string& secret) {
  if (secret.empty() || sig.size() != 32) return false;
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac.data(), &len) ||
      len != 32)
    return false;
  return CRYPTO_memcmp(mac.data(), sig.data(), 32) == 0;
}

// One EVP_DigestVerify with SHA-256 (RSASSA-PKCS1-v1_5 for RSA keys, the default padding;
// ECDSA with a DER signature for EC keys).
bool digest_verify(EVP_PKEY* key, std::string_view input, const unsigned char* sig,
                   std::size_t sig_len) {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx) return false;
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1) return false;
  return EVP_DigestVerify(ctx.get(), sig, sig_len,
                          reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
}

bool is_p256(EVP_PKEY* key) {
  if (EVP_PKEY_is_a(key, "EC") != 1) return false;
  char group[80] = {0};
  std::size_t len = 0;
  if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &len) !=
      1)
    return false;
  int nid = OBJ_sn2nid(group);
  if (nid == NID_undef) nid = EC_curve_nist2nid(group);
  return nid == NID_X9_62_prime256v1;
}

bool verify_rs256(std::string_view input, const Bytes& sig, const std::vector<EVP_PKEY*>& keys) {
  for (EVP_PKEY* key : keys) {
    // Only plain RSA keys (not RSA-PSS, never EC), and a signature exactly the modulus' size.
    if (!key || EVP_PKEY_is_a(key, "RSA") != 1) continue;
    if (EVP_PKEY_get_bits(key) < 2048) continue;
    if (sig.size() != static_cast<std::size_t>(EVP_PKEY_get_size(key))) continue;
    if (digest_verify(key, input, sig.data(), sig.size())) return true;
  }
  return false;
}

// JOSE ES256 signatures are r || s, 32 bytes each; OpenSSL wants DER.
std::optional<Bytes> es256_der(const Bytes& sig) {
  if (sig.size() != 64) return std::nullopt;
  std::unique_ptr<BIGNUM, BnFree> r(BN_bin2bn(sig.data(), 32, nullptr));
  std::unique_ptr<BIGNUM, BnFree> s(BN_bin2bn(sig.data() + 32, 32, nullptr));
  std::unique_ptr<ECDSA_SIG, SigFree> es(ECDSA_SIG_new());
  if (!r || !s || !es) return std::nullopt;
  if (ECDSA_SIG_set0(es.get(), r.get(), s.get()) != 1) return std::nullopt;
  r.release();  // owned by `es` now
  s.release();
  int len = i2d_ECDSA_SIG(es.get(), nullptr);
  if (len <= 0) return std::nullopt;
  Bytes der(static_cast<std::size_t>(len));
  unsigned char* p = der.data();
  if (i2d_ECDSA_SIG(es.get(), &p) != len) return std::nullopt;
  return der;
}

bool verify_es256(std::string_view input, const Bytes& sig, const std::vector<EVP_PKEY*>& keys) {
  auto der = es256_der(sig);
  if (!der) return false;
  for (EVP_PKEY* key : keys) {
    if (!key || !is_p256(key)) continue;
    if (digest_verify(key, input, der->data(), der->size())) return true;
  }
  return false;
}

// EdDSA (RFC 8037): Ed25519 or Ed448 keys, the signature over the input itself (no digest).
bool verify_eddsa(std::string_view input, const Bytes& sig, const std::vector<EVP_PKEY*>& keys) {
  for (EVP_PKEY* key : keys) {
    const bool ed25519 = EVP_PKEY_is_a(key, "ED25519") == 1;
    if (!ed25519 && EVP_PKEY_is_a(key, "ED448") != 1) continue;
    if (sig.size() != (ed25519 ? 64u : 114u)) continue;
    std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
    if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key) != 1) continue;
    if (EVP_DigestVerify(ctx.get(), sig.data(), sig.size(),
                         reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1)
      return true;
  }
  return false;
}

// Whether `key` is of the kind `alg` checks with (verify_* skip the others too).
bool fits(JwtAlgorithm alg, EVP_PKEY* key) {
  switch (alg) {
    case JwtAlgorithm::rs256:
      return EVP_PKEY_is_a(key, "RSA") == 1;
    case JwtAlgorithm::es256:
      return is_p256(key);
    case JwtAlgorithm::eddsa:
      return EVP_PKEY_is_a(key, "ED25519") == 1 || EVP_PKEY_is_a(key, "ED448") == 1;
    case JwtAlgorithm::hs256:
      break;
  }
  return false;
}

// The keys a token may be checked with: the configured PEM keys, and from a JWKS the keys
// with the token's kid, or, when it names none, the first max_kidless_tries keys of its
// algorithm's kind (each check of a forged token costs a verification; an issuer that signs
// without kids publishes one key or two). `kid_unknown`: it named one the set does not have.
std::vector<EVP_PKEY*> candidates(const config::JwtSettings& settings, const KeySet* jwks,
                                  JwtAlgorithm alg, const boost::json::object& header,
                                  bool& kid_unknown) {
  std::vector<EVP_PKEY*> out;
  for (const auto& k : settings.keys)
    if (k) out.push_back(k.get());
  kid_unknown = false;
  if (!jwks) return out;
  auto kid = header.find("kid");
  if (kid == header.end() || !kid->value().is_string()) {
    std::size_t tries = 0;
    for (const auto& k : jwks->keys) {
      if (tries == max_kidless_tries) break;
      if (!fits(alg, k.key.get())) continue;
      out.push_back(k.key.get());
      ++tries;
    }
    return out;
  }
  bool found = false;
  for (const auto& k : jwks->keys)
    if (k.kid == kid->value().get_string()) {
      out.push_back(k.key.get());
      found = true;
    }
  kid_unknown = !found;
  return out;
}

// A NumericDate: a JSON number (integer or not). Absent -> nullopt with ok = true.
struct NumericDate {
  bool ok = true;
  std::optional<double> value;
};

NumericDate numeric_date(const boost::json::object& claims, std::string_view name) {
  auto it = claims.find(name);
  if (it == claims.end()) return {};
  const auto& v = it->value();
  if (v.is_int64()) return {true, static_cast<double>(v.get_int64())};
  if (v.is_uint64()) return {true, static_cast<double>(v.get_uint64())};
  if (v.is_double() && std::isfinite(v.get_double())) return {true, v.get_double()};
  return {false, std::nullopt};
}

JwtResult fail(JwtError e) {
  return JwtResult{e, {}};
}

JwtResult verify(std::string_view header_value, const config::JwtSettings& settings,
                 std::int64_t now_seconds, const KeySet* jwks) {
  std::string_view token = trim_blanks(header_value);
  if (token.empty()) return fail(JwtError::missing);
  if (auto sp = token.find_first_of(" \t"); sp != std::string_view::npos) {
    if (!iequals(token.substr(0, sp), "bearer")) return fail(JwtError::missing);
    token = trim_blanks(token.substr(sp));
  } else if (iequals(token, "bearer")) {
    return fail(JwtError::missing);
  }
  if (token.size() > max_jwt_length) return fail(JwtError::malformed);

  auto dot1 = token.find('.');
  if (dot1 == std::string_view::npos) return fail(JwtError::malformed);
  auto dot2 = token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos)
    return fail(JwtError::malformed);
  std::string_view header_b64 = token.substr(0, dot1);
  std::string_view payload_b64 = token.substr(dot1 + 1, dot2 - dot1 - 1);
  std::string_view sig_b64 = token.substr(dot2 + 1);
  if (header_b64.empty() || payload_b64.empty()) return fail(JwtError::malformed);

  auto header_bytes = base64url_decode(header_b64);
  auto payload_bytes = base64url_decode(payload_b64);
  auto sig = base64url_decode(sig_b64);
  if (!header_bytes || !payload_bytes || !sig) return fail(JwtError::malformed);

  auto header = parse_object(*header_bytes);
  if (!header) return fail(JwtError::malformed);
  auto alg_it = header->find("alg");
  if (alg_it == header->end() || !alg_it->value().is_string()) return fail(JwtError::malformed);
  auto alg = algorithm_named(alg_it->value().get_string());
  if (!alg || std::find(settings.algorithms.begin(), settings.algorithms.end(), *alg) ==
                  settings.algorithms.end())
    return fail(JwtError::algorithm_not_allowed);
  if (auto typ = header->find("typ"); typ != header->end())
    if (!typ->value().is_string() || !iequals(typ->value().get_string(), "JWT"))
      return fail(JwtError::malformed);
  // No extension is understood, so a token that declares one critical cannot be accepted.
  if (header->contains("crit")) return fail(JwtError::malformed);

  std::string_view signing_input = token.substr(0, dot2);
  bool good = false;
  bool kid_unknown = false;
  if (*alg == JwtAlgorithm::hs256) {
    good = verify_hs256(signing_input, *sig, settings.hs256_secret);
  } else {
    const auto keys = candidates(settings, jwks, *alg, *header, kid_unknown);
    if (*alg == JwtAlgorithm::rs256) good = verify_rs256(signing_input, *sig, keys);
    if (*alg == JwtAlgorithm::es256) good = verify_es256(signing_input, *sig, keys);
    if (*alg == JwtAlgorithm::eddsa) good = verify_eddsa(signing_input, *sig, keys);
  }
  ERR_clear_error();  // failed verifications leave entries on this thread's queue
  if (!good) return fail(kid_unknown ? JwtError::unknown_key : JwtError::bad_signature);

  auto claims = parse_object(*payload_bytes);
  if (!claims) return fail(JwtError::malformed);

  const double now = static_cast<double>(now_seconds);
  const double leeway = std::chrono::duration<double>(settings.leeway).count();
  auto exp = numeric_date(*claims, "exp");
  auto nbf = numeric_date(*claims, "nbf");
  if (!exp.ok || !nbf.ok) return fail(JwtError::malformed);
  if (exp.value && now > *exp.value + leeway) return fail(JwtError::expired);
  if (nbf.value && now + leeway < *nbf.value) return fail(JwtError::not_yet_valid);

  if (!settings.issuer.empty()) {
    auto iss = claims->find("iss");
    if (iss == claims->end() || !iss->value().is_string() ||
        iss->value().get_string() != settings.issuer)
      return fail(JwtError::wrong_issuer);
  }
  if (!settings.audience.empty()) {
    bool match = false;
    if (auto aud = claims->find("aud"); aud != claims->end()) {
      const auto& v = aud->value();
      if (v.is_string()) {
        match = v.get_string() == settings.audience;
      } else if (v.is_array()) {
        for (const auto& e : v.get_array())
          if (e.is_string() && e.get_string() == settings.audience) match = true;
      }
    }
    if (!match) return fail(JwtError::wrong_audience);
  }
  return JwtResult{JwtError::none, std::move(*claims)};
}

}  // namespace

// RFC 4648 section 5 without padding. Rejects '=', characters outside the alphabet, an
// impossible length and non-zero unused bits (so each byte string has exactly one encoding).
std::optional<std::vector<unsigned char>> base64url_decode(std::string_view in) {
  if (in.size() % 4 == 1) return std::nullopt;
  std::vector<unsigned char> out;
  out.reserve(in.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = b64url_value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<unsigned char>((acc >> bits) & 0xFF));
    }
  }
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

const char* to_string(JwtError e) {
  switch (e) {
    case JwtError::none:
      return "none";
    case JwtError::missing:
      return "missing";
    case JwtError::malformed:
      return "malformed";
    case JwtError::algorithm_not_allowed:
      return "algorithm_not_allowed";
    case JwtError::bad_signature:
      return "bad_signature";
    case JwtError::unknown_key:
      return "unknown_key";
    case JwtError::expired:
      return "expired";
    case JwtError::not_yet_valid:
      return "not_yet_valid";
    case JwtError::wrong_issuer:
      return "wrong_issuer";
    case JwtError::wrong_audience:
      return "wrong_audience";
  }
  return "unknown";
}

JwtResult verify_jwt(std::string_view header_value, const config::JwtSettings& settings,
                     std::int64_t now_seconds, const KeySet* jwks) {
  try {
    return verify(header_value, settings, now_seconds, jwks);
  } catch (...) {
    ERR_clear_error();
    return fail(JwtError::malformed);
  }
}

std::optional<std::string> claim_text(const boost::json::object& claims, std::string_view name) {
  auto it = claims.find(name);
  if (it == claims.end()) return std::nullopt;
  const auto& v = it->value();
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_int64()) return std::to_string(v.get_int64());
  if (v.is_uint64()) return std::to_string(v.get_uint64());
  if (v.is_bool()) return std::string(v.get_bool() ? "true" : "false");
  return std::nullopt;
}

}  // namespace floodgate::keys
