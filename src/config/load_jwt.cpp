// The jwt section: the issuer, audiences, algorithms and the keys that verify tokens.
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <variant>

#include "floodgate/tls/contexts.hpp"
#include "sections.hpp"

namespace floodgate::config {
namespace {

// A PEM public key ("BEGIN PUBLIC KEY") or certificate, RSA (>= 2048 bits) or EC P-256.
std::variant<std::shared_ptr<evp_pkey_st>, std::string> read_public_key(const std::string& file) {
  constexpr std::size_t max_bytes = 1 << 20;
  std::string pem;
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(file.c_str(), "rb"), &std::fclose);
    if (!f) return std::string(std::strerror(errno));
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
      pem.append(buf, n);
      if (pem.size() > max_bytes) return std::string("file larger than 1MiB");
    }
    if (std::ferror(f.get())) return std::string(std::strerror(errno));
  }
  ERR_clear_error();
  auto from_pem = [&]() -> EVP_PKEY* {
    std::unique_ptr<BIO, int (*)(BIO*)> bio(
        BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
    if (!bio) return nullptr;
    if (EVP_PKEY* k = PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr)) return k;
    return nullptr;
  };
  auto from_cert = [&]() -> EVP_PKEY* {
    std::unique_ptr<BIO, int (*)(BIO*)> bio(
        BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
    if (!bio) return nullptr;
    std::unique_ptr<X509, void (*)(X509*)> cert(
        PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free);
    return cert ? X509_get_pubkey(cert.get()) : nullptr;
  };
  std::string why;
  EVP_PKEY* raw = nullptr;
  if (pem.find("-----BEGIN CERTIFICATE-----") != std::string::npos) {
    raw = from_cert();
    if (!raw) why = "invalid certificate (" + tls::openssl_error_text("unreadable") + ")";
  } else if (pem.find("-----BEGIN PUBLIC KEY-----") != std::string::npos) {
    raw = from_pem();
    if (!raw) why = "invalid public key (" + tls::openssl_error_text("unreadable") + ")";
  } else if (pem.find("PRIVATE KEY-----") != std::string::npos) {
    why = "this is a private key; give the public key (openssl pkey -in KEY -pubout)";
  } else if (pem.find("-----BEGIN RSA PUBLIC KEY-----") != std::string::npos) {
    why =
        "PKCS#1 \"RSA PUBLIC KEY\" is not supported; convert it to \"PUBLIC KEY\" "
        "(openssl rsa -RSAPublicKey_in -in FILE -pubout)";
  } else {
    why = "no \"PUBLIC KEY\" or \"CERTIFICATE\" PEM block found";
  }
  ERR_clear_error();
  if (!raw) return why;
  std::shared_ptr<evp_pkey_st> key(raw, &EVP_PKEY_free);
  if (EVP_PKEY_is_a(raw, "RSA")) {
    int bits = EVP_PKEY_get_bits(raw);
    if (bits < 2048)
      return "RSA key of " + std::to_string(bits) +
             " bits is too short (RS256 needs at least 2048)";
    return key;
  }
  if (EVP_PKEY_is_a(raw, "EC")) {
    char group[80] = {0};
    std::size_t len = 0;
    if (EVP_PKEY_get_utf8_string_param(raw, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group,
                                       &len) != 1) {
      ERR_clear_error();
      return std::string("EC key with an unknown curve (ES256 needs P-256)");
    }
    int nid = OBJ_sn2nid(group);
    if (nid == NID_undef) nid = EC_curve_nist2nid(group);
    if (nid != NID_X9_62_prime256v1)
      return "EC key on curve " + std::string(group) + " (ES256 needs P-256)";
    return key;
  }
  const char* type = EVP_PKEY_get0_type_name(raw);
  return std::string("unsupported key type ") + (type ? type : "?") + " (expected RSA or EC P-256)";
}

}  // namespace

void read_jwt(const Section& s, JwtSettings& out) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(),
             {"header", "algorithms", "hs256_secret", "public_keys", "jwks", "issuer", "audience",
              "leeway"}))
    return;
  s.string("header", out.header);
  s.string("hs256_secret", out.hs256_secret);
  s.string("issuer", out.issuer);
  s.string("audience", out.audience);
  s.duration("leeway", out.leeway, Duration(0));
  bool keys_ok = true;
  if (s.has("public_keys")) {
    for (const auto& e : r.sequence(s["public_keys"], s.at("public_keys"))) {
      auto p = r.string(e, s.at("public_keys"));
      if (!p) {
        keys_ok = false;
        continue;
      }
      *p = r.resolve_path(*p);
      out.public_keys.push_back(*p);
      auto key = read_public_key(*p);
      if (auto* why = std::get_if<std::string>(&key)) {
        r.error(e, s.at("public_keys"), "cannot read public key from " + *p + ": " + *why);
        keys_ok = false;
      } else {
        out.keys.push_back(std::get<std::shared_ptr<evp_pkey_st>>(std::move(key)));
      }
    }
  }
  if (s.has("jwks")) out.jwks = read_jwks(Section(r, s["jwks"], s.at("jwks")));
  if (s.require("algorithms")) {
    for (const auto& e : r.sequence(s["algorithms"], s.at("algorithms"))) {
      if (e.IsScalar() && (e.Scalar() == "none" || e.Scalar() == "NONE")) {
        r.error(e, s.at("algorithms"), "\"none\" is never accepted: tokens must be signed");
        continue;
      }
      auto a = r.choice<JwtAlgorithm>(e, s.at("algorithms"),
                                      {{"HS256", JwtAlgorithm::hs256},
                                       {"RS256", JwtAlgorithm::rs256},
                                       {"ES256", JwtAlgorithm::es256},
                                       {"EdDSA", JwtAlgorithm::eddsa}});
      if (a && std::find(out.algorithms.begin(), out.algorithms.end(), *a) == out.algorithms.end())
        out.algorithms.push_back(*a);
    }
  }
  auto uses = [&](JwtAlgorithm a) {
    return std::find(out.algorithms.begin(), out.algorithms.end(), a) != out.algorithms.end();
  };
  if (uses(JwtAlgorithm::hs256) && out.hs256_secret.empty())
    r.error(s.node(), s.path(), "HS256 needs \"hs256_secret\"");
  if ((uses(JwtAlgorithm::rs256) || uses(JwtAlgorithm::es256) || uses(JwtAlgorithm::eddsa)) &&
      out.public_keys.empty() && !s.has("jwks"))
    r.error(s.node(), s.path(), "RS256, ES256 and EdDSA need \"public_keys\" or \"jwks\"");
  // Every key read, but none of the kind an allowed algorithm needs: all such tokens would fail.
  auto has_key = [&](const char* type) {
    return std::any_of(out.keys.begin(), out.keys.end(),
                       [&](const auto& k) { return EVP_PKEY_is_a(k.get(), type) == 1; });
  };
  if (keys_ok && !out.keys.empty()) {
    if (uses(JwtAlgorithm::rs256) && !has_key("RSA"))
      r.warn(s["public_keys"], s.at("public_keys"),
             "RS256 is allowed but no RSA key is listed: every RS256 token will be rejected");
    if (uses(JwtAlgorithm::es256) && !has_key("EC"))
      r.warn(s["public_keys"], s.at("public_keys"),
             "ES256 is allowed but no EC P-256 key is listed: every ES256 token will be rejected");
  }
}

}  // namespace floodgate::config
