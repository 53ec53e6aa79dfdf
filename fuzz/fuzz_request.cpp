// Client bytes through the steps the HTTP/1.1 session takes, the real ones (pipeline.hpp):
// the session's request parser (Beast's, into the exchange's Fields) with its limits, the framing
// checks, route_exchange (target parsing, path normalization, routing), the limit gate deciding on
// an in-process store (keys from headers, query, verified JWT claims and the client behind trusted
// proxies; the deny cache; a refusal rendered), the head rewritten for the upstream, a
// response settled, the access-log line with replay fields, and the body read through a small
// buffer as the relay reads it. Pipelined requests are served in turn, as one keep-alive
// connection would serve them, against one store: later ones can be refused.

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "exchange/forwarding.hpp"
#include "exchange/pipeline.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "floodgate/store/memory_store.hpp"
#include "h1/error_response.hpp"
#include "h1/http1_client.hpp"
#include "h1/http1_head.hpp"
#include "h1/wire.hpp"
#include "support.hpp"

namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
using namespace floodgate;
using Parser = http::RequestParser;

// Every key part kind, a cost header, tiers from a claim, a shadow limit, allow and deny
// lists, and a peer that is a trusted proxy so that X-Forwarded-For is walked.
constexpr const char* kConfig = R"(
server:
  listen: [127.0.0.1:8080]
  client_ip:
    header: X-Forwarded-For
    trusted_proxies: [10.0.0.0/8, "fd00::/8"]
    ipv6_prefix: 56
  max_header_bytes: 8KiB
  max_body_bytes: 64KiB
log: { access_log: true, replay_fields: auto }
upstreams:
  origin: { url: http://127.0.0.1:9000 }
store:
  key_secret: fuzz-key-secret-0123456789abcdef
jwt:
  algorithms: [HS256]
  hs256_secret: fuzz-hs256-secret-0123456789abcdef
lists:
  deny: { cidrs: [192.0.2.0/24, "2001:db8::/32"], values: { "header:X-Api-Key": [banned] } }
  allow: { cidrs: [198.51.100.7], values: { "jwt:tenant": [internal], "query:key": [partner] } }
routes:
  - name: login
    match: { path: /login, methods: [POST], host: shop.example }
    upstream: origin
    limits:
      - { name: login-ip, algorithm: sliding_log, limit: 10, window: 5m, key: [ip] }
      - name: login-user
        algorithm: sliding_log
        limit: 5
        window: 15m
        key: ["header:X-Login-User"]
        on_missing_key: skip
  - name: api
    match: { path_prefix: /api/ }
    upstream: origin
    lists: { deny: { values: { host: [Evil.Example] } } }
    limits:
      - name: api-key
        algorithm: token_bucket
        capacity: 100
        refill_rate: 10/s
        key: ["header:X-Api-Key", method]
        on_missing_key: skip
        cost: { from: "header:X-Cost", default: 1, max: 50 }
      - name: query-key
        algorithm: fixed_window
        limit: 100
        window: 60s
        key: ["query:key", path]
        on_missing_key: shared
        settle: "response_header:X-Used"
      - { name: in-flight, algorithm: concurrency, limit: 4, key: [ip, route] }
      - name: user
        algorithm: gcra
        capacity: 10
        refill_rate: 2/s
        key: ["jwt:sub", host]
        overrides: { by: "jwt:tier", values: { gold: { capacity: 100 } } }
  - name: site
    match: { path_prefix: / }
    upstream: origin
    limits:
      - name: site-ip
        algorithm: sliding_window
        limit: 600
        window: 60s
        key: [ip]
        mode: shadow
        count: { status: ["4xx", 503] }
      - name: site-daily
        algorithm: quota
        period: day
        timezone: Europe/Berlin
        limit: 100000
        key: ["header:x-api-key"]
        on_missing_key: skip
)";

constexpr std::string_view kPeer = "10.1.2.3";
constexpr std::size_t kMaxPipelined = 8;

struct Fixture {
  config::ConfigPtr config = fuzz::load_fixture(kConfig, "fuzz-request.yaml");
  config::IpAddress peer = *config::parse_ip(kPeer);
  metrics::Metrics metrics{"fuzz", "fuzz"};
  std::shared_ptr<spdlog::logger> log =
      std::make_shared<spdlog::logger>("fuzz", std::make_shared<spdlog::sinks::null_sink_mt>());
  limit::FakeClock clock{fuzz::kNowSeconds * limit::kMicrosPerSecond};
};

// One connection's worth of state: a store, the worker's gate over it, and its loop.
struct Connection {
  explicit Connection(Fixture& fx)
      : state(fx.clock, 1000),
        store(state, ioc.get_executor()),
        local(state, ioc.get_executor()),
        gate(store, local, fx.metrics, *fx.log, "fuzz:") {}
  boost::asio::io_context ioc;
  store::MemoryState state;
  store::MemoryStore store;
  store::MemoryStore local;
  decide::Gate gate;
};

// What the session does with one request whose head has been read; false when it would close
// the connection. The exchange is logged however it ends.
bool serve(Fixture& fx, Connection& conn, Parser& parser, http::Exchange& x) {
  auto& req = parser.get();
  http::take_http1_head(x, req, parser.keep_alive() && parser.is_done());
  x.peer_ip = kPeer;
  x.peer = fx.peer;
  if (!http::framing_is_safe(req, parser.chunked())) return false;
  if (auto unrouted = http::route_exchange(x)) {
    x.status = unrouted->status;
    http::render(http::Reply{unrouted->status}, x.version, x.can_continue);
    return x.can_continue && !unrouted->close;
  }
  if (http::gated(x)) {
    std::optional<http::Reply> reply;
    boost::asio::co_spawn(
        conn.ioc,
        [&]() -> boost::asio::awaitable<void> {
          reply = co_await http::decide_exchange(conn.gate, x, *fx.log);
        },
        boost::asio::detached);
    conn.ioc.run();
    conn.ioc.restart();
    if (reply) {
      x.status = reply->status;
      http::render(*reply, x.version, x.can_continue);
      return x.can_continue;
    }
  }
  http::UpstreamFraming framing{std::nullopt, parser.chunked(), false};
  if (auto n = parser.content_length()) framing.content_length = *n;
  http::prepare_upstream_head(x, req, x.config->upstream_of(*x.route).servers.front(), framing);
  std::string head;
  http::append_head(head, req);
  // An upstream response reporting a true cost (and a refund) for the settled limit.
  http::ResponseHead res;
  res.status = 200;
  res.fields.set("X-Used", "0");
  http::settle_response(conn.gate, x, res.fields);
  http::add_rate_headers(x, res.fields);
  x.status = 200;
  return true;
}

// Reads the body through a small buffer (so that it fills and is emptied repeatedly). Returns
// false unless the whole message was read.
bool read_body(Parser& parser, std::string_view& in) {
  std::array<char, 256> chunk;
  parser.eager(true);
  while (!parser.is_done()) {
    parser.body_into(chunk);
    beast::error_code ec;
    auto used = parser.put(boost::asio::buffer(in.data(), in.size()), ec);
    in.remove_prefix(used);
    if (ec == bhttp::error::need_buffer) continue;
    if (ec || used == 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture fx;
  Connection conn(fx);
  std::string_view in(reinterpret_cast<const char*>(data), size);
  for (std::size_t n = 0; n < kMaxPipelined && !in.empty(); ++n) {
    http::RequestHead head;
    Parser parser(head);
    parser.header_limit(static_cast<std::uint32_t>(fx.config->server.max_header_bytes));
    parser.body_limit(fx.config->server.max_body_bytes);
    beast::error_code ec;
    // All bytes are already "buffered": one put() is what async_read_header would do.
    auto used = parser.put(boost::asio::buffer(in.data(), in.size()), ec);
    in.remove_prefix(used);
    if (ec || !parser.is_header_done()) {
      if (ec && ec != bhttp::error::need_more)
        http::error_response(ec == bhttp::error::header_limit
                                 ? bhttp::status::request_header_fields_too_large
                                 : bhttp::status::bad_request,
                             11, false);
      break;
    }
    http::Exchange x;
    x.config = fx.config;
    x.arrived = fx.clock.now();
    bool keep_alive = parser.keep_alive();
    bool go_on = serve(fx, conn, parser, x);
    http::log_exchange(x, *fx.log, conn.gate.hasher(*x.config));
    http::finish_exchange(conn.gate, x);  // the response ended
    if (!go_on || !read_body(parser, in) || !keep_alive) break;
  }
  return 0;
}
