// A real origin for tests and the demo: a small HTTP/1.1 server that counts what reaches it.
//   GET /__stats      {"requests":N,"connections":M,"targets":[last 64 targets]} (not counted)
//   GET /__reset      zeroes the counters (not counted)
//   ANY /echo...      JSON: method, target, headers, body_bytes, body_fnv (body streamed, not kept)
//   GET /bytes/N      N bytes of a known pattern, streamed (?chunked=1 for chunked framing)
//   GET /slow/MS      answers after MS milliseconds
//   GET /close        answers with Connection: close
//   GET /respond?H=V  answers with response header H: V (each query pair)
//   anything else     200 "ok"
// Usage: floodgate-test-origin [--bind ADDR] [--port N] [--log-targets FILE]
//   prints the bound port, then serves. --log-targets appends "METHOD target" for every
//   counted request to FILE, one line written at a time, so a soak can find a request that
//   reached the origin twice even across origin restarts.
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <cstdio>
#include <deque>
#include <iostream>
#include <string>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::as_tuple;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

namespace {

struct Stats {
  std::FILE* target_log = nullptr;
  std::uint64_t requests = 0;
  std::uint64_t connections = 0;
  std::deque<std::string> targets;
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

asio::awaitable<void> send_pattern(beast::tcp_stream& s, std::uint64_t n, bool chunked,
                                   unsigned version, bool keep_alive) {
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

asio::awaitable<void> session(tcp::socket socket, Stats& stats) {
  ++stats.connections;
  beast::tcp_stream s(std::move(socket));
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
      std::string t;
      for (const auto& x : stats.targets) t += (t.empty() ? "\"" : ",\"") + json_escape(x) + "\"";
      res.body() = "{\"requests\":" + std::to_string(stats.requests) +
                   ",\"connections\":" + std::to_string(stats.connections) + ",\"targets\":[" + t +
                   "]}";
    } else if (target == "/__reset") {
      stats = Stats{stats.target_log};
      res.body() = "reset";
    } else {
      ++stats.requests;
      stats.targets.push_back(std::string(req.method_string()) + " " + target);
      if (stats.target_log) std::fprintf(stats.target_log, "%s\n", stats.targets.back().c_str());
      if (stats.targets.size() > 64) stats.targets.pop_front();
      if (target.starts_with("/echo")) {
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
          if (eq != std::string_view::npos) res.set(pair.substr(0, eq), pair.substr(eq + 1));
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
      beast::error_code ignored;
      s.socket().shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
  }
}

asio::awaitable<void> serve(tcp::acceptor& acc, Stats& stats) {
  for (;;) {
    auto [ec, socket] = co_await acc.async_accept(as_tuple(use_awaitable));
    if (ec) continue;
    socket.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(acc.get_executor(), session(std::move(socket), stats), asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  unsigned short port = 0;
  std::string bind = "127.0.0.1";
  std::string log_path;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--port")
      port = static_cast<unsigned short>(std::stoi(argv[i + 1]));
    if (std::string(argv[i]) == "--bind") bind = argv[i + 1];
    if (std::string(argv[i]) == "--log-targets") log_path = argv[i + 1];
  }
  asio::io_context ioc{1};
  tcp::acceptor acc(ioc, tcp::endpoint(asio::ip::make_address(bind), port));
  Stats stats;
  if (!log_path.empty()) {
    stats.target_log = std::fopen(log_path.c_str(), "a");
    if (!stats.target_log) {
      std::cerr << "cannot open " << log_path << "\n";
      return 2;
    }
    std::setvbuf(stats.target_log, nullptr, _IOLBF, 0);  // a killed origin loses no line
  }
  std::cout << acc.local_endpoint().port() << std::endl;
  asio::co_spawn(ioc, serve(acc, stats), asio::detached);
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](auto, int) { ioc.stop(); });
  ioc.run();
}
