#include "floodgate/tls/contexts.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace floodgate::tls {
namespace {

// TLS 1.2 suites: forward secret AEAD only (TLS 1.3 has its own list, OpenSSL's default,
// which is already AEAD only). No RSA key exchange, no CBC, no SHA-1 MACs.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// ALPN wire format: length-prefixed protocol names.
constexpr unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// fopen's reason for a file that cannot be read, or "" when it can.
std::string unreadable(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) return std::strerror(errno);
  std::fclose(f);
  return {};
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::string> names_of(X509* cert) {
  std::vector<std::string> names;
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (sans) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* n = sk_GENERAL_NAME_value(sans, i);
      if (n->type != GEN_DNS) continue;
      const auto* s = n->d.dNSName;
      names.push_back(lower(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                        static_cast<std::size_t>(ASN1_STRING_length(s)))));
    }
    GENERAL_NAMES_free(sans);
  }
  if (names.empty()) {  // no DNS SAN: the subject's common name, as clients used to check
    char cn[256];
    if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn) > 0)
      names.push_back(lower(cn));
  }
  return names;
}

std::string time_text(const ASN1_TIME* t) {
  std::unique_ptr<BIO, int (*)(BIO*)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  if (!bio || ASN1_TIME_print(bio.get(), t) != 1) return "?";
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

// Offers http/1.1 when the client lists it; otherwise the handshake goes on without ALPN
// (a client that wants only h2 then learns it from the absent answer).
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned int inlen, void*) {
  for (unsigned i = 0; i < inlen;) {
    unsigned len = in[i];
    if (i + 1 + len > inlen) break;
    if (len == kAlpnHttp11[0] && std::memcmp(in + i + 1, kAlpnHttp11 + 1, len) == 0) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

bool name_matches(std::string_view pattern, std::string_view name) {
  if (pattern.size() > 2 && pattern.substr(0, 2) == "*.") {
    // A wildcard covers exactly one leftmost label: *.example.com matches a.example.com,
    // not example.com nor a.b.example.com.
    auto dot = name.find('.');
    return dot != std::string_view::npos && dot > 0 && name.substr(dot) == pattern.substr(1);
  }
  return pattern == name;
}

}  // namespace

std::string openssl_error_text(const char* fallback) {
  unsigned long code = 0, last = 0;
  while ((code = ERR_get_error()) != 0) last = code;
  if (last == 0) return fallback;
  const char* reason = ERR_reason_error_string(last);
  return reason ? reason : fallback;
}

std::variant<Certificate, CertificateError> load_certificate(const std::string& cert_file,
                                                             const std::string& key_file,
                                                             const std::string& min_version) {
  using File = CertificateError::File;
  if (auto why = unreadable(cert_file); !why.empty())
    return CertificateError{File::cert, "cannot read certificate " + cert_file + ": " + why};
  if (auto why = unreadable(key_file); !why.empty())
    return CertificateError{File::key, "cannot read key " + key_file + ": " + why};
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), &SSL_CTX_free);
  if (!ctx) return CertificateError{File::cert, openssl_error_text("out of memory")};
  SSL_CTX_set_min_proto_version(ctx.get(), min_version == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_cipher_list(ctx.get(), kTls12Ciphers);
  SSL_CTX_set_alpn_select_cb(ctx.get(), &select_alpn, nullptr);
  // Buffers are released while a connection is idle: a keep-alive TLS connection then costs
  // a few hundred bytes instead of ~34 KiB.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  const std::string mismatch =
      "private key " + key_file + " does not match the certificate in " + cert_file;
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert_file.c_str()) != 1)
    return CertificateError{File::cert, "no usable PEM certificate in " + cert_file + " (" +
                                            openssl_error_text("unreadable") + ")"};
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    auto why = openssl_error_text("unreadable");
    if (why == "key values mismatch") return CertificateError{File::key, mismatch};
    return CertificateError{File::key,
                            "no usable PEM private key in " + key_file + " (" + why + ")"};
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) return CertificateError{File::key, mismatch};
  Certificate c;
  X509* leaf = SSL_CTX_get0_certificate(ctx.get());
  c.names = names_of(leaf);
  c.expired = X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0;
  c.not_after = time_text(X509_get0_notAfter(leaf));
  c.context = std::move(ctx);
  return c;
}

ServerContexts::ServerContexts(std::vector<Certificate> certificates, std::vector<std::string> alpn)
    : certificates_(std::move(certificates)), alpn_(std::move(alpn)) {
  for (auto& c : certificates_) {
    SSL_CTX_set_tlsext_servername_callback(c.context.get(), &ServerContexts::on_server_name);
    SSL_CTX_set_tlsext_servername_arg(c.context.get(), this);
    SSL_CTX_set_alpn_select_cb(c.context.get(), &ServerContexts::on_alpn, this);
  }
}

ServerContexts::~ServerContexts() {
  // Connections still open hold their own reference to a context; make sure none of them
  // can call back into this object.
  for (auto& c : certificates_) {
    SSL_CTX_set_tlsext_servername_arg(c.context.get(), nullptr);
    SSL_CTX_set_alpn_select_cb(c.context.get(), &select_alpn, nullptr);
  }
}

// The first of ours (in our order) that the client offers.
int ServerContexts::on_alpn(SSL* ssl, const unsigned char** out, unsigned char* outlen,
                            const unsigned char* in, unsigned int inlen, void* arg) {
  const auto* self = static_cast<const ServerContexts*>(arg);
  if (!self) return select_alpn(ssl, out, outlen, in, inlen, nullptr);
  for (const auto& ours : self->alpn_)
    for (unsigned i = 0; i < inlen;) {
      unsigned len = in[i];
      if (i + 1 + len > inlen) break;
      if (len == ours.size() && std::memcmp(in + i + 1, ours.data(), len) == 0) {
        *out = in + i + 1;
        *outlen = static_cast<unsigned char>(len);
        return SSL_TLSEXT_ERR_OK;
      }
      i += 1 + len;
    }
  return SSL_TLSEXT_ERR_NOACK;
}

ssl_st* ServerContexts::new_connection() const {
  if (certificates_.empty()) return nullptr;
  return SSL_new(certificates_.front().context.get());
}

std::size_t ServerContexts::select(std::string_view server_name) const {
  std::string name = lower(std::string(server_name));
  if (!name.empty() && name.back() == '.') name.pop_back();
  for (std::size_t i = 0; i < certificates_.size(); ++i)
    for (const auto& pattern : certificates_[i].names)
      if (name_matches(pattern, name)) return i;
  return 0;
}

int ServerContexts::on_server_name(SSL* ssl, int*, void* arg) {
  const auto* self = static_cast<const ServerContexts*>(arg);
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (!self || !name) return SSL_TLSEXT_ERR_OK;  // no SNI: the default certificate
  std::size_t i = self->select(name);
  if (i != 0) SSL_set_SSL_CTX(ssl, self->certificates_[i].context.get());
  return SSL_TLSEXT_ERR_OK;
}

std::variant<std::shared_ptr<ssl_ctx_st>, std::string> make_client_context(
    const std::string& ca_file, const std::string& cert_file, const std::string& key_file,
    bool http_alpn) {
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), &SSL_CTX_free);
  if (!ctx) return openssl_error_text("out of memory");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_cipher_list(ctx.get(), kTls12Ciphers);
  if (http_alpn) SSL_CTX_set_alpn_protos(ctx.get(), kAlpnHttp11, sizeof kAlpnHttp11);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (cert_file.empty() != key_file.empty()) return "a client certificate needs both cert and key";
  if (!cert_file.empty()) {
    if (auto why = unreadable(cert_file); !why.empty())
      return "cannot read " + cert_file + ": " + why;
    if (auto why = unreadable(key_file); !why.empty())
      return "cannot read " + key_file + ": " + why;
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert_file.c_str()) != 1)
      return "no certificate in " + cert_file + " (" + openssl_error_text("unreadable") + ")";
    const bool key_read =
        SSL_CTX_use_PrivateKey_file(ctx.get(), key_file.c_str(), SSL_FILETYPE_PEM) == 1;
    // OpenSSL checks the pair as it loads the key: a mismatch is that error, not a bad file.
    if ((!key_read && ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) ||
        (key_read && SSL_CTX_check_private_key(ctx.get()) != 1)) {
      ERR_clear_error();
      return "the key in " + key_file + " does not match the certificate in " + cert_file;
    }
    if (!key_read)
      return "no private key in " + key_file + " (" + openssl_error_text("unreadable") + ")";
  }
  if (ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1)
      return "cannot load the system CA certificates (" + openssl_error_text("unknown") + ")";
  } else {
    if (auto why = unreadable(ca_file); !why.empty()) return "cannot read " + ca_file + ": " + why;
    if (SSL_CTX_load_verify_locations(ctx.get(), ca_file.c_str(), nullptr) != 1)
      return "no CA certificate in " + ca_file + " (" + openssl_error_text("unreadable") + ")";
    // The workers share this context and verify concurrently. OpenSSL computes a trusted
    // certificate's cached extensions (its key identifier, compared with the server's AKID)
    // the first time one is checked, writing into the shared X509 under its lock while another
    // handshake may read it without: ThreadSanitizer saw exactly that with two workers. Done
    // here, once, before any worker runs, every handshake only reads them.
    STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx.get()));
    for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i)
      if (X509* ca = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objects, i)))
        X509_check_purpose(ca, -1, 0);
  }
  return ctx;
}

ssl_st* new_client_connection(ssl_ctx_st* context, const std::string& host) {
  SSL* ssl = SSL_new(context);
  if (!ssl) return nullptr;
  unsigned char ip[16];
  const bool is_ip =
      inet_pton(AF_INET, host.c_str(), ip) == 1 || inet_pton(AF_INET6, host.c_str(), ip) == 1;
  bool ok = true;
  if (is_ip) {
    // RFC 6066 forbids IP literals in SNI; the certificate must name the address instead.
    ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  } else {
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    ok = SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 && SSL_set1_host(ssl, host.c_str()) == 1;
  }
  if (!ok) {
    SSL_free(ssl);
    return nullptr;
  }
  return ssl;
}

std::string verify_failure(const ssl_st* ssl) {
  long result = SSL_get_verify_result(ssl);
  if (result == X509_V_OK) return {};
  return X509_verify_cert_error_string(result);
}

}  // namespace floodgate::tls
