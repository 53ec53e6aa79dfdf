#include "ws_client.hpp"

#include <boost/asio/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include "deadline.hpp"

namespace floodgate::testing {

namespace ssl = asio::ssl;
namespace websocket = beast::websocket;
using Ec = boost::system::error_code;
using std::chrono::milliseconds;

// One interface over websocket::stream<tcp::socket> and over a TLS stream, so that the
// client's steps are written once.
struct WsClient::Conn {
  virtual ~Conn() = default;
  virtual Ec connect(std::uint16_t port, const WsOptions& o, Response& response) = 0;
  virtual Ec write(std::string_view data, bool text, milliseconds timeout) = 0;
  virtual Ec read(beast::flat_buffer& into, bool& text, milliseconds timeout) = 0;
  virtual Ec close(milliseconds timeout) = 0;
  virtual websocket::close_reason reason() const = 0;
};

namespace {

// TLS handshake for the secure stream; nothing to do for the plain one.
Ec secure(asio::io_context&, tcp::socket&, const WsOptions&) {
  return {};
}
template <typename S>
Ec secure(asio::io_context& ioc, tcp::socket& socket, const WsOptions& o, ssl::stream<S>& s) {
  if (!o.sni.empty()) SSL_set_tlsext_host_name(s.native_handle(), o.sni.c_str());
  if (!o.sni.empty() && !o.ca_file.empty()) SSL_set1_host(s.native_handle(), o.sni.c_str());
  return run_with_deadline(ioc, socket, o.timeout, [&](auto handler) {
    s.async_handshake(ssl::stream_base::client, handler);
  });
}

template <typename Next>
class Session final : public WsClient::Conn {
 public:
  template <typename... Args>
  explicit Session(Args&&... args) : ws_(ioc_, std::forward<Args>(args)...) {}

  Ec connect(std::uint16_t port, const WsOptions& o, Response& response) override {
    tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
    auto ec = run(o.timeout, [&](auto h) { socket().async_connect(ep, h); });
    if (ec) return ec;
    socket().set_option(tcp::no_delay(true));
    if constexpr (std::is_same_v<Next, tcp::socket>)
      ec = secure(ioc_, socket(), o);
    else
      ec = secure(ioc_, socket(), o, ws_.next_layer());
    if (ec) return ec;
    ws_.set_option(websocket::stream_base::decorator([&o](websocket::request_type& req) {
      for (const auto& [name, value] : o.headers) req.set(name, value);
    }));
    return run(o.timeout, [&](auto h) { ws_.async_handshake(response, o.host, o.target, h); });
  }

  Ec write(std::string_view data, bool text, milliseconds timeout) override {
    ws_.text(text);
    return run(timeout, [&](auto h) { ws_.async_write(asio::buffer(data), h); });
  }

  Ec read(beast::flat_buffer& into, bool& text, milliseconds timeout) override {
    auto ec = run(timeout, [&](auto h) { ws_.async_read(into, h); });
    text = ws_.got_text();
    return ec;
  }

  Ec close(milliseconds timeout) override {
    return run(timeout, [&](auto h) { ws_.async_close(websocket::close_code::normal, h); });
  }

  websocket::close_reason reason() const override { return ws_.reason(); }

 private:
  tcp::socket& socket() { return beast::get_lowest_layer(ws_); }
  template <typename Op>
  Ec run(milliseconds timeout, Op op) {
    return run_with_deadline(ioc_, socket(), timeout, op);
  }

  asio::io_context ioc_;
  websocket::stream<Next> ws_;
};

// Holds the TLS context, which must outlive the stream made from it.
class TlsSession final : public WsClient::Conn {
 public:
  explicit TlsSession(const WsOptions& o) : ctx_(ssl::context::tls_client) {
    if (o.ca_file.empty()) {
      ctx_.set_verify_mode(ssl::verify_none);
    } else {
      ctx_.set_verify_mode(ssl::verify_peer);
      ctx_.load_verify_file(o.ca_file);
    }
    inner_ = std::make_unique<Session<ssl::stream<tcp::socket>>>(ctx_);
  }
  Ec connect(std::uint16_t port, const WsOptions& o, Response& r) override {
    return inner_->connect(port, o, r);
  }
  Ec write(std::string_view d, bool text, milliseconds t) override {
    return inner_->write(d, text, t);
  }
  Ec read(beast::flat_buffer& b, bool& text, milliseconds t) override {
    return inner_->read(b, text, t);
  }
  Ec close(milliseconds t) override { return inner_->close(t); }
  websocket::close_reason reason() const override { return inner_->reason(); }

 private:
  ssl::context ctx_;
  std::unique_ptr<Session<ssl::stream<tcp::socket>>> inner_;
};

}  // namespace

WsClient::WsClient(std::uint16_t port, WsOptions options) {
  if (options.tls)
    conn_ = std::make_unique<TlsSession>(options);
  else
    conn_ = std::make_unique<Session<tcp::socket>>();
  response_.result(0);  // stays 0 unless a response arrives
  if (auto ec = conn_->connect(port, options, response_)) error_ = ec.message();
}

WsClient::~WsClient() = default;

bool WsClient::send_text(std::string_view text) {
  last_error_ =
      open() ? conn_->write(text, true, std::chrono::seconds(5)) : asio::error::not_connected;
  return !last_error_;
}

bool WsClient::send_binary(std::string_view data) {
  last_error_ =
      open() ? conn_->write(data, false, std::chrono::seconds(5)) : asio::error::not_connected;
  return !last_error_;
}

std::optional<std::string> WsClient::read(milliseconds timeout) {
  if (!open()) {
    last_error_ = asio::error::not_connected;
    return std::nullopt;
  }
  beast::flat_buffer buffer;
  last_error_ = conn_->read(buffer, last_text_, timeout);
  if (last_error_) return std::nullopt;
  return beast::buffers_to_string(buffer.data());
}

websocket::close_reason WsClient::close_reason() const {
  return conn_->reason();
}

bool WsClient::close(milliseconds timeout) {
  last_error_ = open() ? conn_->close(timeout) : asio::error::not_connected;
  return !last_error_;
}

bool WsClient::ended_within(milliseconds timeout) {
  return !read(timeout) && last_error_ != asio::error::timed_out;
}

}  // namespace floodgate::testing
