#pragma once
// A blocking WebSocket client for tests, over plain TCP or TLS to 127.0.0.1. It keeps the
// upgrade response, so a refused upgrade (429, 502, ...) can be inspected like any other
// response. Every step is bounded by a deadline.

#include <boost/beast/websocket/rfc6455.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace floodgate::testing {

struct WsOptions {
  std::string host = "test";  // the Host header of the upgrade request
  std::string target = "/ws";
  std::vector<std::pair<std::string, std::string>> headers;  // added to the upgrade request
  bool tls = false;
  std::string sni;      // TLS: empty means none; with ca_file, also the name checked
  std::string ca_file;  // TLS: empty means the certificate is not verified
  std::chrono::milliseconds timeout = std::chrono::seconds(5);  // connect, TLS and upgrade
};

class WsClient {
 public:
  // Connects and asks for the upgrade; never throws for a refusal (see open() and status()).
  explicit WsClient(std::uint16_t port, WsOptions options = {});
  ~WsClient();
  WsClient(const WsClient&) = delete;
  WsClient& operator=(const WsClient&) = delete;

  bool open() const { return error_.empty(); }  // upgraded: a WebSocket to talk on
  const std::string& error() const { return error_; }
  int status() const { return response_.result_int(); }  // 101, or the refusal; 0: none came
  const Response& response() const { return response_; }

  bool send_text(std::string_view text);
  bool send_binary(std::string_view data);
  // The next message (nullopt on a close, an error or the deadline: see last_error()).
  std::optional<std::string> read(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  bool last_was_text() const { return last_text_; }
  boost::system::error_code last_error() const { return last_error_; }
  // What the server's close frame said (code 0 when none came).
  boost::beast::websocket::close_reason close_reason() const;
  // A normal close (1000): sends the close frame and waits for the server's.
  bool close(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // True when the server ends the WebSocket (a close frame, EOF or a reset) within
  // `timeout`, having sent no message first.
  bool ended_within(std::chrono::milliseconds timeout);

  struct Conn;  // the plain or TLS stream behind it

 private:
  std::unique_ptr<Conn> conn_;
  std::string error_;
  Response response_{};
  bool last_text_ = false;
  boost::system::error_code last_error_;
};

}  // namespace floodgate::testing
