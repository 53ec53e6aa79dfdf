#pragma once
// A blocking TLS client for tests: one connection to 127.0.0.1, a handshake with exactly the
// knobs a test wants to turn (SNI, ALPN, protocol versions, verification), then raw HTTP/1.1
// over it, as many requests as the test likes. Every step is bounded by a deadline.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness.hpp"

namespace floodgate::testing {

struct TlsOptions {
  std::string sni;                // empty: no server_name extension
  std::vector<std::string> alpn;  // protocols offered, in order; empty: no ALPN
  // "1.0" .. "1.3"; empty: OpenSSL's default. Asking for anything below 1.2 also drops the
  // security level to 0, because OpenSSL 3 otherwise refuses to even offer those versions:
  // the server, not our own library, must be the one to say no.
  std::string min_version;
  std::string max_version;
  std::string ca_file;      // empty: the server's certificate is not verified
  std::string verify_host;  // with ca_file: the DNS name or IP it must match; defaults to sni
  std::chrono::milliseconds timeout = std::chrono::seconds(5);  // for connect and handshake
};

class TlsClient {
 public:
  // Connects and handshakes; never throws for a refused handshake (see ok() and error()).
  explicit TlsClient(std::uint16_t port, TlsOptions options = {});
  ~TlsClient();
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  bool ok() const { return error_.empty(); }
  // Why the connect or handshake failed ("" when it succeeded); a failed verification says
  // why the certificate was refused, e.g. "... (certificate has expired)".
  const std::string& error() const { return error_; }
  std::string version() const;    // "TLSv1.3", "TLSv1.2"
  std::string alpn() const;       // "" when none was negotiated
  std::string peer_name() const;  // subject CN, or the first SAN DNS name when there is no CN

  bool send(std::string_view bytes);
  // Reads one response (nullopt if the connection closed or the deadline passed first).
  std::optional<Response> read_response(std::chrono::milliseconds timeout = std::chrono::seconds(5),
                                        bool head = false);
  std::optional<Response> request(std::string_view raw);
  // True when the server ends the connection (close_notify, EOF or reset) within `timeout`
  // and sends nothing more.
  bool closed_by_peer(std::chrono::milliseconds timeout);
  // How the server ended the connection within `timeout`: "close_notify" (then TCP's end),
  // "truncated" (TCP's end without close_notify), another error's message, or "" when the
  // connection is still open at the deadline (or bytes arrived).
  std::string end_of_connection(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string error_;
};

// One request on a new TLS connection, without verification.
std::optional<Response> tls_get(std::uint16_t port, const std::string& target,
                                const std::string& extra_headers = "");

}  // namespace floodgate::testing
