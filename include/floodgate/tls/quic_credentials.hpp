#pragma once
// A TLS listener's certificates for GnuTLS, which QUIC's handshake runs on (ngtcp2's crypto
// helper for GnuTLS: Debian's libngtcp2-crypto-gnutls). Loaded with the config, beside the
// OpenSSL contexts of the TCP side (contexts.hpp), from the same files, so a snapshot is
// self-contained and a reload that fails keeps the certificates that are serving; a QUIC
// connection holds its own reference to the credentials it started with.
//
// The client's SNI picks a certificate by the TCP side's rule (ServerContexts::select: the
// first whose names match, else the first), so both transports of a listener always present
// the same certificate for a name.

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "contexts.hpp"
#include "fingerprint.hpp"

// GnuTLS's types, opaque here so that users of the config need no GnuTLS headers.
struct gnutls_certificate_credentials_st;
struct gnutls_session_int;

namespace floodgate::tls {

class QuicCredentials;

// What one QUIC handshake's TLS callbacks reach through its session: the credentials the SNI
// chooses among, and where the client's fingerprints go (null: nothing asks for them). Owned
// by the connection, for as long as its session.
struct QuicHandshake {
  const QuicCredentials* credentials = nullptr;
  Fingerprints* fingerprints = nullptr;
};

class QuicCredentials {
 public:
  // One credential per certificate entry (`files`: cert and key paths, in config order);
  // `names` decides which one an SNI selects. The error names the entry's file at fault.
  struct Files {
    std::string cert;
    std::string key;
  };
  static std::variant<std::shared_ptr<const QuicCredentials>, CertificateError> load(
      const std::vector<Files>& files, std::shared_ptr<const ServerContexts> names);
  ~QuicCredentials();
  QuicCredentials(const QuicCredentials&) = delete;
  QuicCredentials& operator=(const QuicCredentials&) = delete;

  // Sets a new server session's credentials to the default (first) certificate, and has the
  // client's SNI, once its ClientHello is read, select another; fills in the client's
  // fingerprints (JA4 over QUIC, JA3) from that ClientHello when `handshake` asks for them.
  // The session refers to this object and to `handshake`: keep both alive as long as it.
  bool configure(gnutls_session_int* session, QuicHandshake& handshake) const;
  // The certificate index an SNI name selects (the TCP side's rule).
  std::size_t select(std::string_view server_name) const { return names_->select(server_name); }

 private:
  QuicCredentials() = default;
  static int on_client_hello(gnutls_session_int* session);
  std::vector<gnutls_certificate_credentials_st*> credentials_;
  std::shared_ptr<const ServerContexts> names_;
};

}  // namespace floodgate::tls
