// The protocol-free steps of an exchange (pipeline.hpp, decide/gate.hpp) on their own: what
// route_exchange derives and answers, that the views it leaves survive the head's rewrite for
// the upstream, how replies render, and the gate deciding, refusing from its deny cache and
// returning units to the store that charged them.

#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <memory>
#include <optional>
#include <string>

#include "exchange/access_log.hpp"
#include "exchange/pipeline.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/store/memory_store.hpp"
#include "h1/error_response.hpp"
#include "h1/http1_head.hpp"

namespace {

using namespace floodgate;

config::ConfigPtr load_routes(const std::string& routes, const std::string& log = "") {
  const std::string yaml =
      "server:\n  listen: 127.0.0.1:8080\n"
      "  client_ip: { header: X-Forwarded-For, trusted_proxies: [127.0.0.1/32] }\n" +
      log + "upstreams:\n  origin: { url: \"http://10.0.0.1:9000\" }\n" +
      "store: { key_secret: pipeline-test-secret }\nroutes:\n" + routes;
  auto r = config::load_config_text(yaml, "test.yaml", config::process_env());
  for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
  return r.config;
}

const std::string kPipelineRoutes = R"(
  - name: shop
    match: { host: shop.example, path_prefix: /cart }
    upstream: origin
  - name: api
    match: { path_prefix: /api/ }
    upstream: origin
    limits: [{ name: per-ip, algorithm: fixed_window, limit: 2, window: 1h, key: [ip] }]
)";

struct Request {
  http::RequestHead req;
  http::Exchange x;
  Request(const config::ConfigPtr& c, const std::string& target, const std::string& host = "") {
    req.set_method("GET");
    req.set_target(target);
    if (!host.empty()) req.fields.set("Host", host);
    req.fields.set("X-Forwarded-For", "203.0.113.9");
    x.config = c;
    x.arrived = 1'800'000'000 * limit::kMicrosPerSecond;
    http::take_http1_head(x, req, true);
    x.peer_ip = "127.0.0.1";
    x.peer = *config::parse_ip("127.0.0.1");
  }
};

TEST(Pipeline, RouteExchangeAnswersWhatCannotBeForwarded) {
  auto c = load_routes(kPipelineRoutes);
  ASSERT_TRUE(c);
  struct Case {
    std::string target, host;
    std::optional<int> status;
    bool close = false;
  } cases[] = {
      {"/cart/1", "shop.example", std::nullopt},
      {"/cart/1", "other.example", 404},
      {"/nothing", "shop.example", 404},
      {"*", "shop.example", 400, true},                  // not a target a proxy takes
      {"/cart/%zz", "shop.example", 400, false},         // a bad escape: the connection may go on
      {"/cart/a%2fb", "shop.example", 400, false},       // an encoded separator the route refuses
      {"/api/../cart/1", "shop.example", std::nullopt},  // routed by its normal form
  };
  for (const auto& k : cases) {
    Request r(c, k.target, k.host);
    auto unrouted = http::route_exchange(r.x);
    ASSERT_EQ(unrouted.has_value(), k.status.has_value()) << k.target;
    if (unrouted) {
      EXPECT_EQ(unrouted->status, *k.status) << k.target;
      EXPECT_EQ(unrouted->close, k.close) << k.target;
      EXPECT_EQ(r.x.route, nullptr) << k.target;
    } else {
      ASSERT_NE(r.x.route, nullptr);
      EXPECT_EQ(r.x.route->name, "shop") << k.target;
      EXPECT_EQ(r.x.target.path, "/cart/1") << k.target;
    }
  }
}

// An absolute-form target overrides Host and is rewritten to origin-form for the upstream:
// what the exchange holds stays valid after that rewrite (the access log reads it last).
TEST(Pipeline, AbsoluteFormTargetsOutliveTheRewriteForTheUpstream) {
  auto c = load_routes(kPipelineRoutes, "log: { access_log: true, replay_fields: [ip, host] }\n");
  ASSERT_TRUE(c);
  Request r(c, "http://Shop.Example:8080/cart/./a/../b?q=1%2F", "ignored.example");
  ASSERT_FALSE(http::route_exchange(r.x));
  http::prepare_upstream_head(r.x, r.req, c->upstream_of(*r.x.route).servers.front(), {});
  EXPECT_EQ(r.req.target, "/cart/b?q=1%2F");
  EXPECT_EQ(r.req.fields.get("Host"), "Shop.Example:8080");
  EXPECT_EQ(r.req.fields.get("X-Forwarded-For"), "203.0.113.9, 127.0.0.1");
  EXPECT_EQ(r.x.host, "Shop.Example:8080");
  EXPECT_EQ(r.x.target.path, "/cart/b");
  EXPECT_EQ(r.x.target.query, "q=1%2F");
  keys::KeyHasher hasher("pipeline-test-secret");
  auto line = http::access_line(r.x, {}, hasher);
  EXPECT_NE(line.find(R"("path":"/cart/b")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("fields":{"ip":"203.0.113.9","host":"Shop.Example")"), std::string::npos)
      << line;
}

TEST(Pipeline, RepliesRenderTheirStatusHeadersAndBody) {
  auto c = load_routes(kPipelineRoutes);
  ASSERT_TRUE(c);
  auto busy = http::render(http::Reply{503, "1"}, 11, true);
  EXPECT_EQ(busy.status, 503u);
  EXPECT_NE(busy.bytes.find("\r\nRetry-After: 1\r\n"), std::string::npos) << busy.bytes;
  EXPECT_TRUE(busy.bytes.ends_with("\r\n\r\nservice unavailable\n")) << busy.bytes;

  const auto& limit = c->routes[1].limits[0];
  limit::Decision d{.admitted = false,
                    .limit = 2,
                    .remaining = 0,
                    .reset_after = 30 * limit::kMicrosPerSecond,
                    .retry_after = 30 * limit::kMicrosPerSecond};
  auto refusal = http::render(
      http::refused(c->routes[1], limit, limit::Params::from(limit, limit.params), d, 0), 11,
      false);
  EXPECT_TRUE(refusal.bytes.starts_with("HTTP/1.1 429 ")) << refusal.bytes;
  EXPECT_NE(refusal.bytes.find("\r\nRetry-After: 30\r\n"), std::string::npos) << refusal.bytes;
  EXPECT_NE(refusal.bytes.find("\r\nContent-Type: application/json\r\n"), std::string::npos);
  EXPECT_NE(refusal.bytes.find("\r\nConnection: close\r\n"), std::string::npos);
  EXPECT_TRUE(refusal.bytes.ends_with("\r\n\r\n" + limit::refusal_body(limit, d) + "\n"))
      << refusal.bytes;
}

// A route's own refusal page: its status and content type, its placeholders filled in, any
// other brace sent as written; the rate-limit headers as always.
TEST(Pipeline, ARoutesRefusalPageReplacesTheBuiltInJson) {
  auto c = load_routes(R"(
  - name: branded
    match: { path_prefix: / }
    upstream: origin
    refusal:
      status: 503
      content_type: text/html; charset=utf-8
      body: "<style>p{color:red}</style><p>{limit} on {route}: back in {retry_after} s ({request_id}) {other}</p>"
    limits: [{ name: per-ip, algorithm: fixed_window, limit: 2, window: 1m, key: [ip] }]
)");
  ASSERT_TRUE(c);
  const auto& route = c->routes[0];
  const auto& limit = route.limits[0];
  limit::Decision d{.admitted = false,
                    .limit = 2,
                    .remaining = 0,
                    .reset_after = 42 * limit::kMicrosPerSecond,
                    .retry_after = 42 * limit::kMicrosPerSecond};
  auto reply = http::refused(route, limit, limit::Params::from(limit, limit.params), d, 0);
  reply.request_id = "0af7651916cd43dd8448eb211c80319c";
  auto out = http::render(reply, 11, false);
  EXPECT_TRUE(out.bytes.starts_with("HTTP/1.1 503 ")) << out.bytes;
  EXPECT_NE(out.bytes.find("\r\nContent-Type: text/html; charset=utf-8\r\n"), std::string::npos);
  EXPECT_NE(out.bytes.find("\r\nRetry-After: 42\r\n"), std::string::npos) << out.bytes;
  EXPECT_TRUE(
      out.bytes.ends_with("\r\n\r\n<style>p{color:red}</style><p>per-ip on branded: back in 42 s "
                          "(0af7651916cd43dd8448eb211c80319c) {other}</p>"))
      << out.bytes;
}

// A store whose every decision fails: the fault the route's on_store_error exists for.
class DownStore final : public store::LimitStore {
 public:
  explicit DownStore(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}
  void async_acquire(std::vector<store::Item>, Handler handler) override {
    boost::asio::post(ex_, [h = std::move(handler)]() mutable {
      std::move(h)(store::AcquireResult(store::StoreError::unavailable));
    });
  }
  void adjust(const store::Item&, std::int64_t) override { ++adjusted; }
  void release(const store::Item&) override { ++released; }
  void reset(const store::Item&) override {}
  bool healthy() const override { return false; }
  int adjusted = 0;
  int released = 0;

 private:
  boost::asio::any_io_executor ex_;
};

struct Gate {
  explicit Gate(bool down)
      : state(clock, 1000),
        local_state(clock, 1000),
        metrics("test", "test"),
        log(std::make_shared<spdlog::logger>("t",
                                             std::make_shared<spdlog::sinks::null_sink_mt>())) {
    if (down)
      primary = std::make_unique<DownStore>(ioc.get_executor());
    else
      primary = std::make_unique<store::MemoryStore>(state, ioc.get_executor());
    local = std::make_unique<store::MemoryStore>(local_state, ioc.get_executor());
    gate = std::make_unique<decide::Gate>(*primary, *local, metrics, *log, "test:");
  }
  std::optional<http::Reply> decide(http::Exchange& x) {
    std::optional<http::Reply> reply;
    boost::asio::co_spawn(
        ioc,
        [&]() -> boost::asio::awaitable<void> {
          reply = co_await http::decide_exchange(*gate, x, *log);
        },
        boost::asio::detached);
    ioc.run();
    ioc.restart();
    return reply;
  }
  limit::FakeClock clock{1'800'000'000 * limit::kMicrosPerSecond};
  boost::asio::io_context ioc;
  store::MemoryState state;
  store::MemoryState local_state;
  metrics::Metrics metrics;
  std::shared_ptr<spdlog::logger> log;
  std::unique_ptr<store::LimitStore> primary;
  std::unique_ptr<store::LimitStore> local;
  std::unique_ptr<decide::Gate> gate;
};

TEST(Gate, AdmitsThenRefusesAndTheNextRefusalComesFromTheDenyCache) {
  auto c = load_routes(kPipelineRoutes);
  ASSERT_TRUE(c);
  Gate g(false);
  for (int i = 0; i < 4; ++i) {
    Request r(c, "/api/x");
    ASSERT_FALSE(http::route_exchange(r.x));
    auto reply = g.decide(r.x);
    if (i < 2) {
      EXPECT_FALSE(reply) << i;
      EXPECT_EQ(r.x.admission.decision, "admitted");
      ASSERT_FALSE(r.x.admission.headers.empty());
    } else {
      ASSERT_TRUE(reply) << i;
      EXPECT_EQ(reply->status, 429);
      ASSERT_TRUE(reply->refusal);
      EXPECT_EQ(reply->refusal->limit->name, "per-ip");
      EXPECT_EQ(r.x.admission.decision, "limited");
    }
    // Keyed by the client behind the trusted proxy, worked out once.
    ASSERT_TRUE(r.x.client);
    EXPECT_EQ(r.x.client->to_string(), "203.0.113.9");
  }
  // The second admission took the last unit: the deny cache knew the third would be refused
  // (until the window resets), so neither refusal cost a store call.
  EXPECT_EQ(g.metrics.route("api").deny_cache_hits.load(), 2u);
}

// With the store down and on_store_error: local, a concurrency unit is charged to the
// in-process store, and returned there: the next request is admitted again.
TEST(Gate, ADegradedAdmissionIsReturnedToTheStoreThatCharged) {
  auto c = load_routes(R"(
  - name: api
    match: { path_prefix: /api/ }
    upstream: origin
    on_store_error: local
    limits: [{ name: one, algorithm: concurrency, limit: 1, key: [route] }]
)");
  ASSERT_TRUE(c);
  Gate g(true);
  for (int i = 0; i < 3; ++i) {
    Request r(c, "/api/x");
    ASSERT_FALSE(http::route_exchange(r.x));
    auto reply = g.decide(r.x);
    EXPECT_FALSE(reply) << i;
    EXPECT_TRUE(r.x.admission.degraded);
    EXPECT_EQ(r.x.admission.decision, "local");
    ASSERT_EQ(r.x.admission.leases.size(), 1u);
    // While it is held, another is refused by the local share.
    Request other(c, "/api/y");
    ASSERT_FALSE(http::route_exchange(other.x));
    auto refused = g.decide(other.x);
    ASSERT_TRUE(refused) << i;
    EXPECT_EQ(refused->status, 429);
    http::finish_exchange(*g.gate, r.x);
  }
  // One outcome per request: the local share's admissions are local, its refusals limited.
  const auto& counts = g.metrics.route("api").outcomes;
  EXPECT_EQ(counts[static_cast<std::size_t>(metrics::Outcome::local)].load(), 3u);
  EXPECT_EQ(counts[static_cast<std::size_t>(metrics::Outcome::limited)].load(), 3u);
}

}  // namespace
