// Client bytes through everything the session does before an upstream sees them: Beast's
// request parser with the session's limits, the framing checks, target parsing and path
// normalization, routing, the route's limits turned into store keys (headers, query, verified
// JWT claims, the client address behind trusted proxies), the head rewritten for the upstream
// (with the normalized path), and the body read
// through a small buffer as the relay reads it. Pipelined requests are served in turn, as
// one keep-alive connection would serve them.

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "floodgate/http/path_normalize.hpp"
#include "floodgate/http/router.hpp"
#include "floodgate/keys/client_ip.hpp"
#include "floodgate/keys/jwt.hpp"
#include "floodgate/limit/algorithm.hpp"
#include "floodgate/limit/policy.hpp"
#include "http/error_response.hpp"
#include "http/forwarding.hpp"
#include "http/request_sources.hpp"
#include "http/wire.hpp"
#include "support.hpp"

namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
using namespace floodgate;
using Parser = bhttp::request_parser<bhttp::buffer_body>;

// Every key part kind, a cost header, tiers from a claim, a shadow limit, and a peer that is
// a trusted proxy so that X-Forwarded-For is walked.
constexpr const char* kConfig = R"(
server:
  listen: [127.0.0.1:8080]
  client_ip:
    header: X-Forwarded-For
    trusted_proxies: [10.0.0.0/8, "fd00::/8"]
    ipv6_prefix: 56
  max_header_bytes: 8KiB
  max_body_bytes: 64KiB
upstreams:
  origin: { url: http://127.0.0.1:9000 }
store:
  key_secret: fuzz-key-secret-0123456789abcdef
jwt:
  algorithms: [HS256]
  hs256_secret: fuzz-hs256-secret-0123456789abcdef
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
)";

constexpr std::string_view kPeer = "10.1.2.3";
constexpr std::size_t kMaxPipelined = 8;

struct Fixture {
  config::ConfigPtr config = fuzz::load_fixture(kConfig, "fuzz-request.yaml");
  config::IpAddress peer = *config::parse_ip(kPeer);
  keys::KeyHasher hasher{config->store.key_secret};
};

// Routing and limits; false when the session would close the connection. An answer of our
// own (404, 401, 400) keeps it open only when the request had no body left to read.
bool serve(Fixture& fx, Parser& parser) {
  const auto& config = *fx.config;
  auto& req = parser.get();
  if (!http::framing_is_safe(req, parser.chunked())) return false;
  auto target = http::parse_target(req.target());
  if (!target) return false;
  std::string_view host =
      target->authority.empty() ? std::string_view(req[bhttp::field::host]) : target->authority;
  std::string normal_target;
  auto normal = http::normalize_target(*target, normal_target);
  if (!normal) return parser.is_done();
  const auto* route = http::match_route(config, req.method_string(), host, target->path);
  if (http::refuses_encoded_separators(normal, route) || !route) return parser.is_done();
  const auto normal_host = http::host_name(host);  // as the session: keys lower-case it
  http::FieldHeaders headers(req);
  http::LazyClaims claims(req, config, fuzz::kNowSeconds);
  const auto& ip = config.server.client_ip;
  keys::RequestFacts facts{
      route->name,   req.method_string(),
      normal_host,   target->path,
      target->query, keys::client_ip(fx.peer, http::joined_values(req, ip.header, ","), ip),
      &headers,      &claims};
  auto plan = limit::plan(config, *route, facts, fx.hasher);
  if (plan.reject_status != 0) return parser.is_done();
  // The 429 each limit would give, with the parameters of the caller's tier.
  for (std::size_t i = 0; i < plan.items.size(); ++i) {
    limit::Decision d{.admitted = false,
                      .limit = 1,
                      .remaining = 0,
                      .reset_after = limit::kMicrosPerSecond,
                      .retry_after = limit::kMicrosPerSecond};
    http::AnswerWriter w(429, req.version(), req.keep_alive());
    limit::rate_headers(*plan.limits[i], plan.items[i].params, d,
                        fuzz::kNowSeconds * limit::kMicrosPerSecond,
                        [&w](std::string_view n, std::string_view v) { w.header(n, v); });
    std::move(w).finish("application/json", limit::refusal_body(*plan.limits[i], d));
  }
  // The head rewritten for the upstream, as the session's prepare_upstream_request does.
  auto content_length = parser.content_length();
  bool chunked = parser.chunked();
  if (!target->authority.empty()) req.set(bhttp::field::host, target->authority);
  if (target->origin_form != std::string_view(req.target()))
    req.target(std::string(target->origin_form));
  http::strip_hop_by_hop(req);
  req.erase(bhttp::field::expect);
  http::add_forwarding_headers(req, {kPeer, false, config.server.pop});
  req.version(11);
  if (content_length)
    req.content_length(*content_length);
  else if (chunked)
    req.chunked(true);
  std::string head;
  http::append_head(head, req);
  return true;
}

// Reads the body through a small buffer (so that it fills and is emptied repeatedly). Returns
// false unless the whole message was read.
bool read_body(Parser& parser, std::string_view& in) {
  std::array<char, 256> chunk;
  parser.eager(true);
  while (!parser.is_done()) {
    auto& body = parser.get().body();
    body.data = chunk.data();
    body.size = chunk.size();
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
  std::string_view in(reinterpret_cast<const char*>(data), size);
  for (std::size_t n = 0; n < kMaxPipelined && !in.empty(); ++n) {
    Parser parser;
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
    bool keep_alive = parser.get().keep_alive();
    if (!serve(fx, parser)) break;
    if (!read_body(parser, in) || !keep_alive) break;
  }
  return 0;
}
