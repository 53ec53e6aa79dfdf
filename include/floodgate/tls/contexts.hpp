#pragma once
// OpenSSL contexts built when a config is loaded, so that a snapshot is self-contained (no
// file is read while serving), `--check-config` finds a bad certificate, and a reload that
// fails keeps the certificates that are serving. A connection holds its own reference to the
// context it started with: replacing a snapshot never disturbs an open connection.

#include <memory>
#include <string>
#include <variant>
#include <vector>

// OpenSSL's types, opaque here so that users of the config need no OpenSSL headers.
struct ssl_ctx_st;
struct ssl_st;

namespace floodgate::tls {

// The most recent OpenSSL error's reason (the error queue emptied), or `fallback`.
std::string openssl_error_text(const char* fallback);

// What went wrong with one certificate entry, and which of its two files is to blame.
struct CertificateError {
  enum class File { cert, key } file;
  std::string message;
};

// One loaded certificate (chain + private key) and the host names it serves.
struct Certificate {
  std::shared_ptr<ssl_ctx_st> context;
  std::vector<std::string> names;  // lower case DNS names from the SAN (or CN); "*.x" wildcards
  bool expired = false;            // served anyway (as nginx does), with a warning at load
  std::string not_after;           // for that warning
};

// "1.2" or "1.3": the lowest protocol version offered.
std::variant<Certificate, CertificateError> load_certificate(const std::string& cert_file,
                                                             const std::string& key_file,
                                                             const std::string& min_version);

// The server side of one TLS listener: the certificates in config order; the client's SNI
// picks the first whose names match it, and an unknown or absent SNI gets the first.
class ServerContexts {
 public:
  // `alpn`: the protocols offered by ALPN, in the server's order of preference ("h2",
  // "http/1.1"); a client that offers none of them gets no ALPN answer.
  ServerContexts(std::vector<Certificate> certificates, std::vector<std::string> alpn);
  ~ServerContexts();
  ServerContexts(const ServerContexts&) = delete;
  ServerContexts& operator=(const ServerContexts&) = delete;

  // A new server-side connection (owned by the caller), or null when OpenSSL is out of memory.
  // The SNI callback refers to this object: keep it alive until the handshake is over.
  ssl_st* new_connection() const;
  // The certificate index an SNI name selects (for tests and logs).
  std::size_t select(std::string_view server_name) const;

 private:
  static int on_server_name(ssl_st* ssl, int* alert, void* arg);
  static int on_alpn(ssl_st* ssl, const unsigned char** out, unsigned char* outlen,
                     const unsigned char* in, unsigned int inlen, void* arg);
  std::vector<Certificate> certificates_;
  std::vector<std::string> alpn_;
};

// The client side for one https upstream (or Redis): peers verified against `ca_file` (PEM,
// may hold several certificates) or, when empty, the system's CAs; a client certificate
// (`cert_file`, a PEM chain, with its `key_file`) when given; ALPN "http/1.1" offered only for
// HTTP. The error names the file and the problem.
std::variant<std::shared_ptr<ssl_ctx_st>, std::string> make_client_context(
    const std::string& ca_file, const std::string& cert_file = {}, const std::string& key_file = {},
    bool http_alpn = true);

// A new client connection to `host` (a DNS name or an IP literal): SNI set for names, and the
// peer certificate checked against the name or the address during the handshake.
ssl_st* new_client_connection(ssl_ctx_st* context, const std::string& host);

// Why the last handshake of `ssl` failed certificate verification, or "" if it did not.
std::string verify_failure(const ssl_st* ssl);

}  // namespace floodgate::tls
