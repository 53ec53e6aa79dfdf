#include "tls_client.hpp"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ssl.hpp>

#include <map>
#include <stdexcept>

#include "deadline.hpp"

namespace floodgate::testing {

namespace ssl = asio::ssl;

struct TlsClient::Impl {
  asio::io_context ioc;
  ssl::context ctx{ssl::context::tls_client};
  std::unique_ptr<ssl::stream<tcp::socket>> stream;  // made once ctx is configured
  beast::flat_buffer buffer;

  tcp::socket& socket() { return stream->next_layer(); }
  SSL* native() { return stream->native_handle(); }
};

namespace {

int protocol_version(const std::string& v) {
  static const std::map<std::string, int> versions = {{"1.0", TLS1_VERSION},
                                                      {"1.1", TLS1_1_VERSION},
                                                      {"1.2", TLS1_2_VERSION},
                                                      {"1.3", TLS1_3_VERSION}};
  auto it = versions.find(v);
  if (it == versions.end()) throw std::invalid_argument("unknown TLS version " + v);
  return it->second;
}

std::string alpn_wire(const std::vector<std::string>& protocols) {
  std::string wire;
  for (const auto& p : protocols) wire += static_cast<char>(p.size()) + p;
  return wire;
}

void configure(ssl::context& ctx, const TlsOptions& o) {
  SSL_CTX* c = ctx.native_handle();
  if (!o.min_version.empty()) SSL_CTX_set_min_proto_version(c, protocol_version(o.min_version));
  if (!o.max_version.empty()) SSL_CTX_set_max_proto_version(c, protocol_version(o.max_version));
  bool legacy = (!o.min_version.empty() && protocol_version(o.min_version) < TLS1_2_VERSION) ||
                (!o.max_version.empty() && protocol_version(o.max_version) < TLS1_2_VERSION);
  if (legacy) {
    SSL_CTX_set_security_level(c, 0);
    SSL_CTX_set_cipher_list(c, "DEFAULT:@SECLEVEL=0");
  }
  if (!o.alpn.empty()) {
    auto wire = alpn_wire(o.alpn);
    // The one OpenSSL setter that returns 0 on success.
    if (SSL_CTX_set_alpn_protos(c, reinterpret_cast<const unsigned char*>(wire.data()),
                                static_cast<unsigned>(wire.size())) != 0)
      throw std::runtime_error("SSL_CTX_set_alpn_protos failed");
  }
  if (o.ca_file.empty()) {
    ctx.set_verify_mode(ssl::verify_none);
  } else {
    ctx.set_verify_mode(ssl::verify_peer);
    ctx.load_verify_file(o.ca_file);
  }
}

// Hostname (or IP) checking is part of the chain verification, so a mismatch fails the
// handshake just as an untrusted issuer does.
void expect_identity(SSL* ssl, const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  if (!ec)
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
  else
    SSL_set1_host(ssl, host.c_str());
}

}  // namespace

TlsClient::TlsClient(std::uint16_t port, TlsOptions options) : impl_(std::make_unique<Impl>()) {
  configure(impl_->ctx, options);
  impl_->stream = std::make_unique<ssl::stream<tcp::socket>>(impl_->ioc, impl_->ctx);
  if (!options.sni.empty()) SSL_set_tlsext_host_name(impl_->native(), options.sni.c_str());
  auto host = options.verify_host.empty() ? options.sni : options.verify_host;
  if (!options.ca_file.empty() && !host.empty()) expect_identity(impl_->native(), host);

  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
  auto ec = run_with_deadline(impl_->ioc, impl_->socket(), options.timeout,
                              [&](auto handler) { impl_->socket().async_connect(ep, handler); });
  if (ec) {
    error_ = "connect: " + ec.message();
    return;
  }
  impl_->socket().set_option(tcp::no_delay(true));
  ec = run_with_deadline(impl_->ioc, impl_->socket(), options.timeout, [&](auto handler) {
    impl_->stream->async_handshake(ssl::stream_base::client, handler);
  });
  if (ec) {
    error_ = "handshake: " + ec.message();
    if (auto v = SSL_get_verify_result(impl_->native()); v != X509_V_OK)
      error_ += std::string(" (") + X509_verify_cert_error_string(v) + ")";
  }
}

TlsClient::~TlsClient() = default;

std::string TlsClient::version() const {
  return ok() ? SSL_get_version(impl_->native()) : "";
}

std::string TlsClient::alpn() const {
  const unsigned char* data = nullptr;
  unsigned len = 0;
  if (ok()) SSL_get0_alpn_selected(impl_->native(), &data, &len);
  return data ? std::string(reinterpret_cast<const char*>(data), len) : "";
}

std::string TlsClient::peer_name() const {
  X509* cert = ok() ? SSL_get0_peer_certificate(impl_->native()) : nullptr;
  if (!cert) return "";
  char cn[256];
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn) > 0)
    return cn;
  std::string first;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names) && first.empty(); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type == GEN_DNS)
      first.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.dNSName)),
                   static_cast<std::size_t>(ASN1_STRING_length(n->d.dNSName)));
  }
  GENERAL_NAMES_free(names);
  return first;
}

bool TlsClient::send(std::string_view bytes) {
  if (!ok()) return false;
  auto ec = run_with_deadline(
      impl_->ioc, impl_->socket(), std::chrono::seconds(5),
      [&](auto handler) { asio::async_write(*impl_->stream, asio::buffer(bytes), handler); });
  return !ec;
}

std::optional<Response> TlsClient::read_response(std::chrono::milliseconds timeout, bool head) {
  if (!ok()) return std::nullopt;
  bhttp::response_parser<bhttp::string_body> p;
  p.body_limit(boost::none);
  p.skip(head);
  auto ec = run_with_deadline(impl_->ioc, impl_->socket(), timeout, [&](auto handler) {
    bhttp::async_read(*impl_->stream, impl_->buffer, p, handler);
  });
  if (ec) return std::nullopt;
  return p.release();
}

std::optional<Response> TlsClient::request(std::string_view raw) {
  if (!send(raw)) return std::nullopt;
  return read_response();
}

bool TlsClient::closed_by_peer(std::chrono::milliseconds timeout) {
  if (!ok()) return true;
  if (impl_->buffer.size() != 0) return false;
  // Whatever arrives is kept, for a later read_response to find.
  auto ec = run_with_deadline(impl_->ioc, impl_->socket(), timeout, [&](auto handler) {
    impl_->stream->async_read_some(impl_->buffer.prepare(4096),
                                   [this, handler](boost::system::error_code ec, std::size_t n) {
                                     impl_->buffer.commit(n);
                                     handler(ec, n);
                                   });
  });
  return ec && ec != asio::error::timed_out && impl_->buffer.size() == 0;
}

std::string TlsClient::end_of_connection(std::chrono::milliseconds timeout) {
  if (!ok() || impl_->buffer.size() != 0) return "";
  auto ec = run_with_deadline(impl_->ioc, impl_->socket(), timeout, [&](auto handler) {
    impl_->stream->async_read_some(impl_->buffer.prepare(4096),
                                   [this, handler](boost::system::error_code ec, std::size_t n) {
                                     impl_->buffer.commit(n);
                                     handler(ec, n);
                                   });
  });
  if (!ec || ec == asio::error::timed_out || impl_->buffer.size() != 0) return "";
  // Asio reports a received close_notify as eof, a TCP end without one as stream_truncated.
  if (ec == asio::error::eof) return "close_notify";
  if (ec == asio::ssl::error::stream_truncated) return "truncated";
  return ec.message();
}

std::optional<Response> tls_get(std::uint16_t port, const std::string& target,
                                const std::string& extra_headers) {
  TlsClient c(port);
  return c.request("GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra_headers + "\r\n");
}

}  // namespace floodgate::testing
