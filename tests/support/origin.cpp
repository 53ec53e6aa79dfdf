// A real origin for tests and the demo: a small HTTP/1.1 server that counts what reaches it.
//   GET /__stats      {"requests":N,"connections":M,"targets":[last 64 targets]} (not counted)
//   GET /__reset      zeroes the counters (not counted)
//   ANY /echo...      JSON: method, target, headers, body_bytes, body_fnv (body streamed, not kept)
//   GET /bytes/N      N bytes of a known pattern, streamed (?chunked=1 for chunked framing)
//   GET /slow/MS      answers after MS milliseconds
//   GET /close        answers with Connection: close
//   GET /respond?H=V  answers with response header H: V (each query pair)
//   GET /ws...        with WebSocket upgrade headers: an echo server. Every message comes back
//                     as it came (text or binary); the text message "close" makes it close the
//                     WebSocket (code 1000) instead. The upgrade counts as one request.
//   anything else     200 "ok"
// Usage: floodgate-test-origin [--bind ADDR] [--port N] [--log-targets FILE]
//                              [--tls-cert FILE --tls-key FILE]
//   prints the bound port, then serves. --log-targets appends "METHOD target" for every
//   counted request to FILE, one line written at a time, so a soak can find a request that
//   reached the origin twice even across origin restarts.
//   With --tls-cert/--tls-key (PEM; the cert file may hold the chain) it speaks HTTPS only,
//   TLS 1.2 or later, with the same endpoints. /__stats then also lists
//   "server_names": the SNI of the last 64 handshakes ("" when the client sent none), so a
//   test can see what name a proxy asked for. A failed handshake still counts as a connection.
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include <array>
#include <cstdio>
#include <deque>
#include <iostream>
#include <memory>
#include <string>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace websocket = beast::websocket;
using asio::as_tuple;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

namespace {

struct Stats {
  std::FILE* target_log = nullptr;
  std::uint64_t requests = 0;
  std::uint64_t connections = 0;
  std::deque<std::string> targets;
  bool tls = false;
  std::deque<std::string> server_names;  // TLS only
};

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else
      out += c;
  }
  return out;
}

char pattern_byte(std::uint64_t i) {
  return static_cast<char>('a' + i % 26);
}

template <typename Stream>
asio::awaitable<void> send_pattern(Stream& s, std::uint64_t n, bool chunked, unsigned version,
                                   bool keep_alive) {
  http::response<http::buffer_body> res{http::status::ok, version};
  res.set(http::field::content_type, "application/octet-stream");
  if (chunked)
    res.chunked(true);
  else
    res.content_length(n);
  res.keep_alive(keep_alive);
  http::response_serializer<http::buffer_body> sr{res};
  auto [ec, _] = co_await http::async_write_header(s, sr, as_tuple(use_awaitable));
  if (ec) co_return;
  std::array<char, 16384> buf;
  std::uint64_t sent = 0;
  while (sent < n) {
    std::size_t len = std::min<std::uint64_t>(buf.size(), n - sent);
    for (std::size_t i = 0; i < len; ++i) buf[i] = pattern_byte(sent + i);
    sent += len;
    res.body().data = buf.data();
    res.body().size = len;
    res.body().more = sent < n;
    auto [wec, wn] = co_await http::async_write(s, sr, as_tuple(use_awaitable));
    if (wec && wec != http::error::need_buffer) co_return;
  }
  if (!sr.is_done()) {
    res.body().data = nullptr;
    res.body().size = 0;
    res.body().more = false;
    co_await http::async_write(s, sr, as_tuple(use_awaitable));
  }
}

// Ends a connection after a response that said Connection: close (or a failed write): the
// peer sees EOF rather than a reset. TLS first says close_notify, but does not wait long for
// the peer's: a proxy that got its response may just drop the connection.
asio::awaitable<void> finish(beast::tcp_stream& s) {
  beast::error_code ignored;
  s.socket().shutdown(tcp::socket::shutdown_send, ignored);
  co_return;
}

asio::awaitable<void> finish(beast::ssl_stream<beast::tcp_stream>& s) {
  beast::get_lowest_layer(s).expires_after(std::chrono::seconds(1));
  co_await s.async_shutdown(as_tuple(use_awaitable));
  beast::error_code ignored;
  beast::get_lowest_layer(s).socket().shutdown(tcp::socket::shutdown_send, ignored);
}

// Takes over the connection after an upgrade request to /ws. The stream is borrowed: the
// session owns it and ends when this returns.
template <typename Stream, typename Request>
asio::awaitable<void> websocket_echo(Stream& s, const Request& req) {
  websocket::stream<Stream&> ws(s);
  auto [ec] = co_await ws.async_accept(req, as_tuple(use_awaitable));
  if (ec) co_return;
  beast::flat_buffer message;
  for (;;) {
    auto [rec, n] = co_await ws.async_read(message, as_tuple(use_awaitable));
    // A close frame from the peer is answered by Beast inside the read; either way, done.
    if (rec) co_return;
    if (ws.got_text() && beast::buffers_to_string(message.data()) == "close") {
      co_await ws.async_close(websocket::close_code::normal, as_tuple(use_awaitable));
      co_return;
    }
    ws.text(ws.got_text());
    auto [wec, wn] = co_await ws.async_write(message.data(), as_tuple(use_awaitable));
    if (wec) co_return;
    message.consume(message.size());
  }
}

std::string json_list(const std::deque<std::string>& items) {
  std::string out;
  for (const auto& x : items) out += (out.empty() ? "\"" : ",\"") + json_escape(x) + "\"";
  return out;
}

template <typename Stream>
asio::awaitable<void> serve_http(Stream& s, Stats& stats) {
  beast::flat_buffer buffer;
  std::array<char, 16384> chunk;
  for (;;) {
    http::request_parser<http::buffer_body> p;
    p.body_limit(boost::none);
    p.header_limit(1 << 20);
    auto [ec, n] = co_await http::async_read_header(s, buffer, p, as_tuple(use_awaitable));
    if (ec) co_return;
    std::uint64_t body_bytes = 0, fnv = 1469598103934665603ull;
    while (!p.is_done()) {
      p.get().body().data = chunk.data();
      p.get().body().size = chunk.size();
      auto [rec, rn] = co_await http::async_read(s, buffer, p, as_tuple(use_awaitable));
      if (rec && rec != http::error::need_buffer) co_return;
      std::size_t got = chunk.size() - p.get().body().size;
      for (std::size_t i = 0; i < got; ++i)
        fnv = (fnv ^ static_cast<unsigned char>(chunk[i])) * 1099511628211ull;
      body_bytes += got;
    }
    auto& req = p.get();
    std::string target(req.target());
    bool keep_alive = req.keep_alive();
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "text/plain");
    if (target == "/__stats") {
      res.body() = "{\"requests\":" + std::to_string(stats.requests) +
                   ",\"connections\":" + std::to_string(stats.connections) + ",\"targets\":[" +
                   json_list(stats.targets) + "]" +
                   (stats.tls ? ",\"server_names\":[" + json_list(stats.server_names) + "]" : "") +
                   "}";
    } else if (target == "/__reset") {
      stats = Stats{stats.target_log, 0, 0, {}, stats.tls, {}};
      res.body() = "reset";
    } else {
      ++stats.requests;
      stats.targets.push_back(std::string(req.method_string()) + " " + target);
      if (stats.target_log) std::fprintf(stats.target_log, "%s\n", stats.targets.back().c_str());
      if (stats.targets.size() > 64) stats.targets.pop_front();
      if (target.starts_with("/ws") && websocket::is_upgrade(req)) {
        // Bytes the client sent after the upgrade request, before our 101, would be lost
        // here; a WebSocket client waits for the 101, so there are none.
        co_await websocket_echo(s, req);
        co_return;
      } else if (target.starts_with("/echo")) {
        std::string h;
        for (const auto& f : req)
          h += (h.empty() ? "" : ",") + std::string("[\"") + json_escape(f.name_string()) +
               "\",\"" + json_escape(f.value()) + "\"]";
        res.set(http::field::content_type, "application/json");
        res.body() = "{\"method\":\"" + json_escape(req.method_string()) + "\",\"target\":\"" +
                     json_escape(target) + "\",\"version\":" + std::to_string(req.version()) +
                     ",\"headers\":[" + h + "],\"body_bytes\":" + std::to_string(body_bytes) +
                     ",\"body_fnv\":\"" + std::to_string(fnv) + "\"}";
      } else if (target.starts_with("/bytes/")) {
        auto q = target.find('?');
        std::uint64_t count = std::stoull(target.substr(7, q == std::string::npos ? q : q - 7));
        bool chunked = target.find("chunked=1") != std::string::npos;
        co_await send_pattern(s, count, chunked, req.version(), keep_alive);
        if (!keep_alive) co_return;
        continue;
      } else if (target.starts_with("/slow/")) {
        asio::steady_timer t(s.get_executor(),
                             std::chrono::milliseconds(std::stoi(target.substr(6))));
        co_await t.async_wait(as_tuple(use_awaitable));
        res.body() = "slow ok";
      } else if (target.starts_with("/respond?")) {
        std::string_view q = std::string_view(target).substr(9);
        while (!q.empty()) {
          auto amp = q.find('&');
          auto pair = q.substr(0, amp);
          auto eq = pair.find('=');
          // __status=NNN: the response's status; any other pair: a header.
          if (eq != std::string_view::npos && pair.substr(0, eq) == "__status")
            res.result(std::stoi(std::string(pair.substr(eq + 1))));
          else if (eq != std::string_view::npos)
            res.set(pair.substr(0, eq), pair.substr(eq + 1));
          if (amp == std::string_view::npos) break;
          q.remove_prefix(amp + 1);
        }
        res.body() = "responded";
      } else if (target == "/close") {
        keep_alive = false;
        res.body() = "bye";
      } else {
        res.body() = "ok";
      }
    }
    res.keep_alive(keep_alive);
    res.prepare_payload();
    auto [wec, wn] = co_await http::async_write(s, res, as_tuple(use_awaitable));
    if (wec || !keep_alive) {
      co_await finish(s);
      co_return;
    }
  }
}

asio::awaitable<void> session(tcp::socket socket, Stats& stats) {
  ++stats.connections;
  beast::tcp_stream s(std::move(socket));
  co_await serve_http(s, stats);
}

asio::awaitable<void> tls_session(tcp::socket socket, ssl::context& ctx, Stats& stats) {
  ++stats.connections;
  beast::ssl_stream<beast::tcp_stream> s(std::move(socket), ctx);
  // A client that connects and never says hello must not hold a coroutine forever.
  beast::get_lowest_layer(s).expires_after(std::chrono::seconds(10));
  auto [ec] = co_await s.async_handshake(ssl::stream_base::server, as_tuple(use_awaitable));
  const char* sni = SSL_get_servername(s.native_handle(), TLSEXT_NAMETYPE_host_name);
  stats.server_names.push_back(sni ? sni : "");
  if (stats.server_names.size() > 64) stats.server_names.pop_front();
  if (ec) co_return;
  beast::get_lowest_layer(s).expires_never();
  co_await serve_http(s, stats);
}

asio::awaitable<void> serve(tcp::acceptor& acc, Stats& stats, ssl::context* tls) {
  for (;;) {
    auto [ec, socket] = co_await acc.async_accept(as_tuple(use_awaitable));
    if (ec) continue;
    socket.set_option(tcp::no_delay(true), ec);
    if (tls)
      asio::co_spawn(acc.get_executor(), tls_session(std::move(socket), *tls, stats),
                     asio::detached);
    else
      asio::co_spawn(acc.get_executor(), session(std::move(socket), stats), asio::detached);
  }
}

// TLS 1.2 and up, the certificate (with any chain after it) and key from PEM files.
std::unique_ptr<ssl::context> tls_context(const std::string& cert, const std::string& key) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->use_certificate_chain_file(cert);
  ctx->use_private_key_file(key, ssl::context::pem);
  return ctx;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned short port = 0;
  std::string bind = "127.0.0.1";
  std::string log_path, tls_cert, tls_key;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--port")
      port = static_cast<unsigned short>(std::stoi(argv[i + 1]));
    if (std::string(argv[i]) == "--bind") bind = argv[i + 1];
    if (std::string(argv[i]) == "--log-targets") log_path = argv[i + 1];
    if (std::string(argv[i]) == "--tls-cert") tls_cert = argv[i + 1];
    if (std::string(argv[i]) == "--tls-key") tls_key = argv[i + 1];
  }
  if (tls_cert.empty() != tls_key.empty()) {
    std::cerr << "--tls-cert and --tls-key go together\n";
    return 2;
  }
  std::unique_ptr<ssl::context> tls;
  try {
    if (!tls_cert.empty()) tls = tls_context(tls_cert, tls_key);
  } catch (const std::exception& e) {
    std::cerr << "cannot load " << tls_cert << " / " << tls_key << ": " << e.what() << "\n";
    return 2;
  }
  asio::io_context ioc{1};
  tcp::acceptor acc(ioc, tcp::endpoint(asio::ip::make_address(bind), port));
  Stats stats;
  stats.tls = tls != nullptr;
  if (!log_path.empty()) {
    stats.target_log = std::fopen(log_path.c_str(), "a");
    if (!stats.target_log) {
      std::cerr << "cannot open " << log_path << "\n";
      return 2;
    }
    std::setvbuf(stats.target_log, nullptr, _IOLBF, 0);  // a killed origin loses no line
  }
  std::cout << acc.local_endpoint().port() << std::endl;
  asio::co_spawn(ioc, serve(acc, stats, tls.get()), asio::detached);
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](auto, int) { ioc.stop(); });
  ioc.run();
}
