// JWK Sets into OpenSSL public keys. Each key is built from its parameters (no PEM round
// trip) and checked: an EC point must lie on P-256, an RSA modulus must be 2048 bits or more.
#include "floodgate/keys/jwks.hpp"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <boost/json/parse.hpp>

#include "floodgate/keys/jwt.hpp"
#include "openssl_free.hpp"

namespace floodgate::keys {

namespace {

using Bytes = std::vector<unsigned char>;

std::shared_ptr<evp_pkey_st> shared(EVP_PKEY* k) {
  return std::shared_ptr<evp_pkey_st>(k, PkeyFree{});
}

std::optional<Bytes> member(const boost::json::object& o, std::string_view name) {
  auto it = o.find(name);
  if (it == o.end() || !it->value().is_string()) return std::nullopt;
  return base64url_decode(it->value().get_string());
}

std::string text(const boost::json::object& o, std::string_view name) {
  auto it = o.find(name);
  return it != o.end() && it->value().is_string() ? std::string(it->value().get_string()) : "";
}

// A public key from OSSL_PARAMs of `type` ("RSA", "EC"), checked as a public key.
EVP_PKEY* from_params(const char* type, OSSL_PARAM_BLD* bld) {
  std::unique_ptr<OSSL_PARAM, ParamFree> params(OSSL_PARAM_BLD_to_param(bld));
  std::unique_ptr<EVP_PKEY_CTX, CtxFree> ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* key = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) != 1)
    return nullptr;
  std::unique_ptr<EVP_PKEY_CTX, CtxFree> check(EVP_PKEY_CTX_new_from_pkey(nullptr, key, nullptr));
  if (!check || EVP_PKEY_public_check(check.get()) != 1) {
    EVP_PKEY_free(key);
    return nullptr;
  }
  return key;
}

EVP_PKEY* rsa_key(const boost::json::object& o) {
  auto n = member(o, "n"), e = member(o, "e");
  if (!n || !e || n->empty() || e->empty()) return nullptr;
  std::unique_ptr<BIGNUM, BnFree> bn_n(BN_bin2bn(n->data(), static_cast<int>(n->size()), nullptr));
  std::unique_ptr<BIGNUM, BnFree> bn_e(BN_bin2bn(e->data(), static_cast<int>(e->size()), nullptr));
  std::unique_ptr<OSSL_PARAM_BLD, BldFree> bld(OSSL_PARAM_BLD_new());
  if (!bn_n || !bn_e || !bld ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1)
    return nullptr;
  EVP_PKEY* key = from_params("RSA", bld.get());
  if (key && EVP_PKEY_get_bits(key) < 2048) {
    EVP_PKEY_free(key);
    return nullptr;
  }
  return key;
}

EVP_PKEY* ec_key(const boost::json::object& o) {
  if (text(o, "crv") != "P-256") return nullptr;
  auto x = member(o, "x"), y = member(o, "y");
  if (!x || !y || x->size() != 32 || y->size() != 32) return nullptr;
  Bytes point{0x04};  // uncompressed: 04 || x || y
  point.insert(point.end(), x->begin(), x->end());
  point.insert(point.end(), y->begin(), y->end());
  std::unique_ptr<OSSL_PARAM_BLD, BldFree> bld(OSSL_PARAM_BLD_new());
  if (!bld ||
      OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) !=
          1 ||
      OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                       point.size()) != 1)
    return nullptr;
  return from_params("EC", bld.get());
}

EVP_PKEY* okp_key(const boost::json::object& o) {
  const auto crv = text(o, "crv");
  const int type = crv == "Ed25519" ? EVP_PKEY_ED25519 : crv == "Ed448" ? EVP_PKEY_ED448 : 0;
  auto x = member(o, "x");
  if (!type || !x || x->size() != (type == EVP_PKEY_ED25519 ? 32u : 57u)) return nullptr;
  return EVP_PKEY_new_raw_public_key(type, nullptr, x->data(), x->size());
}

}  // namespace

std::variant<KeySet, std::string> parse_jwks(std::string_view json) {
  boost::system::error_code ec;
  auto doc = boost::json::parse(json, ec);
  if (ec || !doc.is_object()) return std::string("not a JSON object");
  auto it = doc.get_object().find("keys");
  if (it == doc.get_object().end() || !it->value().is_array())
    return std::string("no \"keys\" array");
  KeySet set;
  std::size_t parsed = 0;
  for (const auto& entry : it->value().get_array()) {
    if (!entry.is_object()) {
      ++set.skipped;
      continue;
    }
    const auto& o = entry.get_object();
    const auto use = text(o, "use");
    const auto kty = text(o, "kty");
    const bool signature_key =
        (use.empty() || use == "sig") && (kty == "RSA" || kty == "EC" || kty == "OKP");
    if (!signature_key) {
      ++set.skipped;
      continue;
    }
    // Counted before parsing, usable or not: the cost is in the parse (an RSA key's check).
    if (++parsed > max_jwks_keys) {
      ++set.dropped;
      continue;
    }
    EVP_PKEY* key = kty == "RSA" ? rsa_key(o) : kty == "EC" ? ec_key(o) : okp_key(o);
    if (!key) {
      ++set.skipped;
      continue;
    }
    set.keys.push_back(Jwk{text(o, "kid"), shared(key)});
  }
  if (set.keys.empty())
    return "no usable signature key among " + std::to_string(set.skipped + set.dropped) +
           " entries" +
           (set.dropped
                ? " (only the first " + std::to_string(max_jwks_keys) + " signature keys are read)"
                : std::string());
  return set;
}

}  // namespace floodgate::keys
