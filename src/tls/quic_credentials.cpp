#include "floodgate/tls/quic_credentials.hpp"

#include <gnutls/gnutls.h>

#include <array>

namespace floodgate::tls {

namespace {

// The ClientHello as received, for the fingerprints: GnuTLS hands it over without its
// handshake header (type and 24-bit length), which the parser reads, so it is put back. A C
// callback: an exception (out of memory) leaves the fingerprints empty, never the handshake.
int on_hello_message(gnutls_session_t session, unsigned, unsigned, unsigned incoming,
                     const gnutls_datum_t* message) {
  auto* handshake = static_cast<QuicHandshake*>(gnutls_db_get_ptr(session));
  if (!incoming || !handshake || !handshake->fingerprints || !message || message->size > 0xffffff)
    return 0;
  try {
    std::string hello;
    hello.reserve(4 + message->size);
    hello += '\x01';
    hello += static_cast<char>((message->size >> 16) & 0xff);
    hello += static_cast<char>((message->size >> 8) & 0xff);
    hello += static_cast<char>(message->size & 0xff);
    hello.append(reinterpret_cast<const char*>(message->data), message->size);
    if (auto parsed = parse_client_hello(hello))
      *handshake->fingerprints = fingerprints_of(*parsed, /*quic=*/true);
  } catch (...) {
  }
  return 0;
}

}  // namespace

std::variant<std::shared_ptr<const QuicCredentials>, CertificateError> QuicCredentials::load(
    const std::vector<Files>& files, std::shared_ptr<const ServerContexts> names) {
  std::shared_ptr<QuicCredentials> out(new QuicCredentials());
  out->names_ = std::move(names);
  for (const auto& f : files) {
    gnutls_certificate_credentials_t cred = nullptr;
    if (gnutls_certificate_allocate_credentials(&cred) != GNUTLS_E_SUCCESS)
      return CertificateError{CertificateError::File::cert, "out of memory (GnuTLS)"};
    out->credentials_.push_back(cred);
    const int rc = gnutls_certificate_set_x509_key_file2(cred, f.cert.c_str(), f.key.c_str(),
                                                         GNUTLS_X509_FMT_PEM, nullptr, 0);
    if (rc < 0) {
      // The OpenSSL side has read both files already: what is left is what GnuTLS alone
      // cannot take (a key format it does not read, say).
      const bool key = rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH || rc == GNUTLS_E_DECRYPTION_FAILED;
      return CertificateError{key ? CertificateError::File::key : CertificateError::File::cert,
                              std::string("GnuTLS (HTTP/3) cannot use it: ") + gnutls_strerror(rc)};
    }
  }
  return std::shared_ptr<const QuicCredentials>(std::move(out));
}

QuicCredentials::~QuicCredentials() {
  for (auto* c : credentials_) gnutls_certificate_free_credentials(c);
}

bool QuicCredentials::configure(gnutls_session_t session, QuicHandshake& handshake) const {
  if (credentials_.empty()) return false;
  if (gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, credentials_.front()) != 0)
    return false;
  // The session's own pointer is ngtcp2's (its crypto helper finds the connection by it); the
  // resumption database's is unused, since floodgate keeps no sessions to resume.
  handshake.credentials = this;
  gnutls_db_set_ptr(session, &handshake);
  if (credentials_.size() > 1)
    gnutls_handshake_set_post_client_hello_function(session, &QuicCredentials::on_client_hello);
  if (handshake.fingerprints)
    gnutls_handshake_set_hook_function(session, GNUTLS_HANDSHAKE_CLIENT_HELLO, GNUTLS_HOOK_PRE,
                                       &on_hello_message);
  return true;
}

// After the ClientHello is parsed and before a certificate is chosen, GnuTLS lets the server
// change the session's settings (credentials among them). A C callback: nothing throws here.
int QuicCredentials::on_client_hello(gnutls_session_t session) {
  const auto* handshake = static_cast<const QuicHandshake*>(gnutls_db_get_ptr(session));
  if (!handshake || !handshake->credentials) return 0;
  const auto* self = handshake->credentials;
  std::array<char, 256> name{};
  std::size_t len = name.size();
  unsigned type = 0;
  if (gnutls_server_name_get(session, name.data(), &len, &type, 0) != GNUTLS_E_SUCCESS ||
      type != GNUTLS_NAME_DNS)
    return 0;  // no SNI: the default certificate
  const auto i = self->select(std::string_view(name.data(), len));
  if (i != 0) gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, self->credentials_[i]);
  return 0;
}

}  // namespace floodgate::tls
