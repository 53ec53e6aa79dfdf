#include "test_pki.hpp"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>

namespace floodgate::testing {
namespace {

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using Bignum = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using Extension = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;

[[noreturn]] void fail(const std::string& what) {
  char reason[256] = "no OpenSSL error";
  if (auto e = ERR_get_error()) ERR_error_string_n(e, reason, sizeof reason);
  ERR_clear_error();
  throw std::runtime_error("TestPki: " + what + ": " + reason);
}

void check(int ok, const char* what) {
  if (ok != 1) fail(what);
}

Key new_key() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) fail("EC key generation");
  return key;
}

// Distinct serials per issuer are what verifiers expect; 64 random bits make a clash moot.
void set_random_serial(X509* cert) {
  Bignum bn(BN_new());
  if (!bn || BN_rand(bn.get(), 64, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1) fail("serial");
  if (!BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert))) fail("serial");
}

void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Extension ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext) fail("extension " + value);
  check(X509_add_ext(cert, ext.get(), -1), "X509_add_ext");
}

std::string alt_names(const std::vector<std::string>& dns, const std::vector<std::string>& ips) {
  std::string out;
  for (const auto& d : dns) out += (out.empty() ? "DNS:" : ",DNS:") + d;
  for (const auto& i : ips) out += (out.empty() ? "IP:" : ",IP:") + i;
  return out;
}

struct Subject {
  std::string cn;
  std::vector<std::string> dns;
  std::vector<std::string> ips;
  std::chrono::hours not_before;
  std::chrono::hours not_after;
  bool ca = false;
};

// `issuer_cert` null means self-signed with `subject_key`.
Cert make_cert(const Subject& s, EVP_PKEY* subject_key, X509* issuer_cert, EVP_PKEY* issuer_key) {
  Cert cert(X509_new());
  if (!cert) fail("X509_new");
  check(X509_set_version(cert.get(), X509_VERSION_3), "version");
  set_random_serial(cert.get());
  auto seconds = [](std::chrono::hours h) {
    return static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(h).count());
  };
  if (!X509_gmtime_adj(X509_getm_notBefore(cert.get()), seconds(s.not_before)) ||
      !X509_gmtime_adj(X509_getm_notAfter(cert.get()), seconds(s.not_after)))
    fail("validity");
  X509_NAME* name = X509_get_subject_name(cert.get());
  check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(s.cn.c_str()), -1, -1, 0),
        "subject CN");
  X509* issuer = issuer_cert ? issuer_cert : cert.get();
  check(X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer)), "issuer");
  check(X509_set_pubkey(cert.get(), subject_key), "public key");

  add_extension(cert.get(), issuer, NID_subject_key_identifier, "hash");
  if (s.ca) {
    add_extension(cert.get(), issuer, NID_basic_constraints, "critical,CA:TRUE");
    add_extension(cert.get(), issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_extension(cert.get(), issuer, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert.get(), issuer, NID_key_usage, "critical,digitalSignature");
    // Both: a leaf serves TLS, and also proves a client (Redis checks its clients' purpose).
    add_extension(cert.get(), issuer, NID_ext_key_usage, "serverAuth,clientAuth");
    if (issuer_cert)
      add_extension(cert.get(), issuer, NID_authority_key_identifier, "keyid:always");
  }
  if (auto san = alt_names(s.dns, s.ips); !san.empty())
    add_extension(cert.get(), issuer, NID_subject_alt_name, san);

  if (X509_sign(cert.get(), issuer_key ? issuer_key : subject_key, EVP_sha256()) <= 0)
    fail("X509_sign");
  return cert;
}

void write_pem(const std::string& path, X509* first, X509* second = nullptr) {
  Bio out(BIO_new_file(path.c_str(), "w"));
  if (!out) fail("cannot write " + path);
  check(PEM_write_bio_X509(out.get(), first), "PEM_write_bio_X509");
  if (second) check(PEM_write_bio_X509(out.get(), second), "PEM_write_bio_X509");
}

void write_key(const std::string& path, EVP_PKEY* key) {
  Bio out(BIO_new_file(path.c_str(), "w"));
  if (!out) fail("cannot write " + path);
  check(PEM_write_bio_PrivateKey(out.get(), key, nullptr, nullptr, 0, nullptr, nullptr),
        "PEM_write_bio_PrivateKey");
}

Cert read_cert(const std::string& path) {
  Bio in(BIO_new_file(path.c_str(), "r"));
  Cert cert(in ? PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) fail("cannot read " + path);
  return cert;
}

Key read_key(const std::string& path) {
  Bio in(BIO_new_file(path.c_str(), "r"));
  Key key(in ? PEM_read_bio_PrivateKey(in.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) fail("cannot read " + path);
  return key;
}

// File names keep the CN readable in a failing test's message.
std::string file_stem(const std::string& dir, int n, const std::string& cn) {
  std::string safe;
  for (char c : cn) safe += std::isalnum(static_cast<unsigned char>(c)) || c == '.' ? c : '_';
  return dir + "/" + std::to_string(n) + "-" + safe;
}

}  // namespace

TestPki::TestPki() {
  auto pattern = (std::filesystem::temp_directory_path() / "floodgate-pki-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("TestPki: mkdtemp failed");
  dir_ = pattern;
  auto key = new_key();
  auto cert = make_cert(
      {"floodgate test CA", {}, {}, std::chrono::hours(-24), std::chrono::hours(24 * 3650), true},
      key.get(), nullptr, nullptr);
  ca_ = {dir_ + "/ca.pem", dir_ + "/ca.key", dir_ + "/ca.pem"};
  write_pem(ca_.cert, cert.get());
  write_key(ca_.key, key.get());
}

TestPki::~TestPki() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

TestPki::Files TestPki::issue(const std::string& cn, const std::vector<std::string>& dns,
                              const std::vector<std::string>& ips, std::chrono::hours not_before,
                              std::chrono::hours not_after) {
  auto ca_cert = read_cert(ca_.cert);
  auto ca_key = read_key(ca_.key);
  auto key = new_key();
  auto cert =
      make_cert({cn, dns, ips, not_before, not_after}, key.get(), ca_cert.get(), ca_key.get());
  auto stem = file_stem(dir_, ++issued_, cn);
  Files f{stem + ".pem", stem + ".key", stem + "-chain.pem"};
  write_pem(f.cert, cert.get());
  write_pem(f.chain, cert.get(), ca_cert.get());
  write_key(f.key, key.get());
  return f;
}

TestPki::Files TestPki::self_signed(const std::string& cn, const std::vector<std::string>& dns,
                                    const std::vector<std::string>& ips) {
  auto key = new_key();
  auto cert = make_cert({cn, dns, ips, std::chrono::hours(-24), std::chrono::hours(24 * 30)},
                        key.get(), nullptr, nullptr);
  auto stem = file_stem(dir_, ++issued_, cn) + "-self";
  Files f{stem + ".pem", stem + ".key", stem + ".pem"};
  write_pem(f.cert, cert.get());
  write_key(f.key, key.get());
  return f;
}

}  // namespace floodgate::testing
