#pragma once
// Signing JWTs and publishing their keys in tests: keys generated in-process (nothing secret
// on disk), compact tokens signed with HS256, RS256, ES256 or EdDSA, and a key's public half
// as a JWK. Written apart from src/keys/ on purpose: a test must not check the verifier
// against itself.

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <string_view>

#include "base64url.hpp"

namespace floodgate::testing {

using Key = std::shared_ptr<evp_pkey_st>;
inline const std::string kSecret = "hs256-test-secret-0123456789abcdef";

inline Key rsa_key(unsigned bits = 2048) {
  return Key(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(bits)), &EVP_PKEY_free);
}
inline Key ec_key(const char* curve = "P-256") {
  return Key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", curve), &EVP_PKEY_free);
}

inline std::string public_pem(const Key& k) {
  std::unique_ptr<BIO, int (*)(BIO*)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  EXPECT_EQ(PEM_write_bio_PUBKEY(bio.get(), k.get()), 1);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

// The public half only, as the config loader would hold it.
inline Key public_only(const Key& k) {
  std::string pem = public_pem(k);
  std::unique_ptr<BIO, int (*)(BIO*)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                          &BIO_free);
  return Key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
}

inline const std::string_view alphabet = floodgate::testing::kBase64UrlAlphabet;
inline char b64url_char(std::size_t i) {
  return alphabet[i];
}
inline std::size_t b64url_index(char c) {
  return std::string_view(alphabet).find(c);
}

inline std::string b64url(std::string_view bytes) {
  return floodgate::testing::base64url(bytes);
}

// EdDSA signs the input itself (no digest).
inline std::string eddsa_sign(const Key& key, std::string_view input);

inline std::string digest_sign(const Key& key, std::string_view input) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EXPECT_EQ(EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()), 1);
  std::size_t len = 0;
  auto in = reinterpret_cast<const unsigned char*>(input.data());
  EXPECT_EQ(EVP_DigestSign(ctx.get(), nullptr, &len, in, input.size()), 1);
  std::string sig(len, '\0');
  EXPECT_EQ(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, in,
                           input.size()),
            1);
  sig.resize(len);
  return sig;
}

// DER ECDSA signature -> JOSE r || s (32 bytes each).
inline std::string der_to_jose(const std::string& der) {
  auto p = reinterpret_cast<const unsigned char*>(der.data());
  std::unique_ptr<ECDSA_SIG, void (*)(ECDSA_SIG*)> sig(
      d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size())), &ECDSA_SIG_free);
  EXPECT_NE(sig, nullptr);
  const BIGNUM* r = nullptr;
  const BIGNUM* s = nullptr;
  ECDSA_SIG_get0(sig.get(), &r, &s);
  std::string out(64, '\0');
  auto o = reinterpret_cast<unsigned char*>(out.data());
  EXPECT_EQ(BN_bn2binpad(r, o, 32), 32);
  EXPECT_EQ(BN_bn2binpad(s, o + 32, 32), 32);
  return out;
}

inline std::string hmac(std::string_view secret, std::string_view input) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &len);
  return std::string(reinterpret_cast<char*>(mac), len);
}

// A compact token with the given raw header and payload JSON; `key` is the private key (or
// nullptr with `secret` for HS256).
inline std::string sign(std::string_view alg, const std::string& header_json,
                        const std::string& payload_json, const Key& key = nullptr,
                        std::string_view secret = kSecret) {
  std::string input = b64url(header_json) + "." + b64url(payload_json);
  std::string sig;
  if (alg == "HS256")
    sig = hmac(secret, input);
  else if (alg == "RS256")
    sig = digest_sign(key, input);
  else if (alg == "ES256")
    sig = der_to_jose(digest_sign(key, input));
  else if (alg == "EdDSA")
    sig = eddsa_sign(key, input);
  return input + "." + b64url(sig);
}

inline std::string header_for(std::string_view alg) {
  return std::string(R"({"alg":")") + std::string(alg) + R"(","typ":"JWT"})";
}

inline Key ed25519_key() {
  return Key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"), &EVP_PKEY_free);
}

inline std::string eddsa_sign(const Key& key, std::string_view input) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EXPECT_EQ(EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()), 1);
  std::string sig(64, '\0');
  std::size_t len = sig.size();
  EXPECT_EQ(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                           reinterpret_cast<const unsigned char*>(input.data()), input.size()),
            1);
  sig.resize(len);
  return sig;
}

// A big-endian number parameter of a key (RSA n, e; EC x, y) as base64url, left-padded to
// `size` bytes (0: its own length).
inline std::string bn_param(const Key& key, const char* name, int size = 0) {
  BIGNUM* bn = nullptr;
  EXPECT_EQ(EVP_PKEY_get_bn_param(key.get(), name, &bn), 1);
  std::string bytes(static_cast<std::size_t>(size ? size : BN_num_bytes(bn)), '\0');
  BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  BN_free(bn);
  return base64url(bytes);
}

// The public half of an RSA, EC P-256 or Ed25519 key as a JWK (RFC 7517/7518/8037).
inline std::string jwk_of(const Key& key, const std::string& kid) {
  std::string head = R"({"kid":")" + kid + R"(","use":"sig",)";
  if (EVP_PKEY_is_a(key.get(), "RSA"))
    return head + R"("kty":"RSA","n":")" + bn_param(key, OSSL_PKEY_PARAM_RSA_N) + R"(","e":")" +
           bn_param(key, OSSL_PKEY_PARAM_RSA_E) + R"("})";
  if (EVP_PKEY_is_a(key.get(), "EC"))
    return head + R"("kty":"EC","crv":"P-256","x":")" +
           bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, 32) + R"(","y":")" +
           bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, 32) + R"("})";
  std::string raw(32, '\0');
  std::size_t len = raw.size();
  EXPECT_EQ(
      EVP_PKEY_get_raw_public_key(key.get(), reinterpret_cast<unsigned char*>(raw.data()), &len),
      1);
  return head + R"("kty":"OKP","crv":"Ed25519","x":")" + base64url(raw) + R"("})";
}

// A header naming `alg` and, when given, `kid`.
inline std::string header_with_kid(std::string_view alg, const std::string& kid) {
  return std::string(R"({"alg":")") + std::string(alg) + R"(","typ":"JWT","kid":")" + kid + R"("})";
}

}  // namespace floodgate::testing
