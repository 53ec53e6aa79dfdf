// The per-request pieces on floodgate's hot path, one at a time: parsing a request head,
// routing, building a route's plan (key parts, HMAC, parameters), encoding the Redis script
// arguments, and writing what goes back (a response head, the rate-limit headers, a whole
// 429), and counting a caller in its limit's top offenders (admin.top). What each costs
// explains the peer benchmark's CPU per request (docs/benchmarks.md).
#include <benchmark/benchmark.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>

#include <string>

#include "exchange/request_sources.hpp"
#include "floodgate/config/cidr_set.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/decide/router.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/heavy_hitters.hpp"
#include "floodgate/limit/policy.hpp"
#include "h1/http1_client.hpp"
#include "h1/wire.hpp"
#include "store/redis/script_calls.hpp"

namespace {

using namespace floodgate;

constexpr std::string_view kRequest =
    "GET /api/v1/orders?page=2 HTTP/1.1\r\n"
    "Host: shop.example.com\r\n"
    "User-Agent: bench/1.0\r\n"
    "Accept: */*\r\n"
    "X-Api-Key: k-0123456789\r\n"
    "\r\n";

const config::Config& bench_config() {
  static const auto loaded = config::load_config_text(
      R"(
server: { listen: ["127.0.0.1:8080"], threads: 1 }
store: { backend: memory, key_secret: bench-secret-0123456789abcdef }
upstreams:
  origin: { url: "http://127.0.0.1:9000" }
routes:
  - name: static
    match: { path_prefix: /static }
    upstream: origin
  - name: login
    match: { path_prefix: /login, methods: [POST] }
    upstream: origin
  - name: api
    match: { path_prefix: /api }
    upstream: origin
    limits:
      - { name: ip-burst, algorithm: token_bucket, capacity: 100, refill_rate: 50/s, key: [ip] }
      - { name: key-minute, algorithm: sliding_window, limit: 6000, window: 1m, key: [header:X-Api-Key] }
)",
      "bench.yaml", [](const std::string&) { return std::optional<std::string>(); });
  if (!loaded.config) throw std::runtime_error("bench config does not load");
  return *loaded.config;
}

void BM_ParseRequestHead(benchmark::State& state) {
  for (auto _ : state) {
    http::RequestHead head;
    http::RequestParser p(head);
    boost::beast::error_code ec;
    p.put(boost::asio::buffer(kRequest), ec);
    benchmark::DoNotOptimize(p.get().target);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseRequestHead);

void BM_Route(benchmark::State& state) {
  const auto& c = bench_config();
  for (auto _ : state)
    benchmark::DoNotOptimize(decide::match_route(c, "GET", "shop.example.com", "/api/v1/orders"));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Route);

// Two limits: an IP part and a header part, each HMAC-hashed into its store key.
void BM_PlanTwoLimits(benchmark::State& state) {
  const auto& c = bench_config();
  const auto* route = decide::match_route(c, "GET", "shop.example.com", "/api/v1/orders");
  http::RequestHead head;
  http::RequestParser p(head);
  boost::beast::error_code ec;
  p.put(boost::asio::buffer(kRequest), ec);
  http::FieldHeaders headers(p.get().fields);
  keys::KeyHasher hasher(c.store.key_secret);
  keys::RequestFacts facts{route->name,      "GET",    "shop.example.com",
                           "/api/v1/orders", "page=2", *config::parse_ip("203.0.113.7"),
                           &headers,         nullptr};
  for (auto _ : state) benchmark::DoNotOptimize(limit::plan(c, *route, facts, hasher));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PlanTwoLimits);

void BM_ScriptArguments(benchmark::State& state) {
  const auto& c = bench_config();
  const auto* route = decide::match_route(c, "GET", "shop.example.com", "/api/v1/orders");
  keys::KeyHasher hasher(c.store.key_secret);
  http::Fields f;
  f.set("X-Api-Key", "k-0123456789");
  http::FieldHeaders headers(f);
  keys::RequestFacts facts{route->name,      "GET",  "shop.example.com",
                           "/api/v1/orders", "",     *config::parse_ip("203.0.113.7"),
                           &headers,         nullptr};
  auto plan = limit::plan(c, *route, facts, hasher);
  auto scripts = store::redis::Scripts::compute();
  const std::string now, lease = "0123456789abcdef:0:";
  for (auto _ : state)
    benchmark::DoNotOptimize(
        store::redis::acquire_args(plan.items, scripts, store::redis::Via::fcall, now, lease));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ScriptArguments);

limit::Decision refused_decision() {
  limit::Decision d;
  d.limit = 100;
  d.reset_after = 2'000'000;
  d.retry_after = 20'000;
  return d;
}

void BM_RateHeaders(benchmark::State& state) {
  const auto& c = bench_config();
  const auto& l = c.routes[2].limits[0];
  auto p = limit::Params::from(l, l.params);
  auto d = refused_decision();
  for (auto _ : state)
    benchmark::DoNotOptimize(limit::rate_headers(l, p, d, 1'800'000'000'000'000));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RateHeaders);

// A whole 429 as it leaves: status line, rate-limit headers, JSON body, in one buffer.
void BM_RefusalAnswer(benchmark::State& state) {
  const auto& c = bench_config();
  const auto& l = c.routes[2].limits[0];
  auto p = limit::Params::from(l, l.params);
  auto d = refused_decision();
  for (auto _ : state) {
    http::AnswerWriter w(429, 11, true);
    limit::rate_headers(l, p, d, 1'800'000'000'000'000,
                        [&w](std::string_view n, std::string_view v) { w.header(n, v); });
    benchmark::DoNotOptimize(std::move(w).finish("application/json", limit::refusal_body(l, d)));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RefusalAnswer);

// The head of a proxied response, serialized flat (what goes out with the body's first piece).
void BM_ResponseHead(benchmark::State& state) {
  http::ResponseHead h;
  h.status = 200;
  auto& f = h.fields;
  f.set("Content-Type", "application/json");
  f.set("Content-Length", "1234");
  f.set("Date", "Mon, 30 Nov 2026 02:00:00 GMT");
  f.set("X-RateLimit-Limit", "100");
  f.set("X-RateLimit-Remaining", "42");
  f.set("X-RateLimit-Reset", "1796000000");
  std::string out;
  for (auto _ : state) {
    out.clear();
    http::append_head(out, h);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ResponseHead);

// What decide::Gate::count_callers does per limit of a request: the store key's id, the window's
// slice, the summary's update, and the caller's text when the key is new. With 20 callers
// that stay (the usual case: every key known) and with every request a new caller (a flood of
// distinct IPs, the worst case: an eviction and a caller text each time). The default
// admin.top: k 20, so 80 counters per slice. Counted: the api route's ip-burst limit.
struct TopCounting {
  limit::TopWindow window{80, 60 * limit::kMicrosPerSecond};
  const config::Limit& limit = bench_config().routes[2].limits[0];
  keys::RequestFacts facts{"api",
                           "GET",
                           "shop.example.com",
                           "/api/v1/orders",
                           "page=2",
                           *config::parse_ip("203.0.113.7"),
                           nullptr,
                           nullptr};
  limit::Micros now = 1'700'000'000 * limit::kMicrosPerSecond;

  void count(std::string_view key) {
    bool fresh = false;
    auto& e = window.at(now += 50).add(limit::key_id(key), 1, fresh);
    if (fresh) keys::append_caller_text(e.caller, limit, facts);
    benchmark::DoNotOptimize(e);
  }
};

void BM_TopCountKnownCallers(benchmark::State& state) {
  TopCounting top;
  std::vector<std::string> keys;
  for (int i = 0; i < 20; ++i)
    keys.push_back("fg:api:ip-burst:{" + std::to_string(1'000'000'000'000 + i * 7919) + "}");
  std::size_t i = 0;
  for (auto _ : state) top.count(keys[i++ % keys.size()]);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TopCountKnownCallers);

void BM_TopCountNewCallers(benchmark::State& state) {
  TopCounting top;
  std::string key = "fg:api:ip-burst:{00000000000000000000000000000000}";
  std::uint64_t n = 0;
  for (auto _ : state) {
    // A new caller each time: its key's hash digits and its address change.
    auto digits = std::to_string(++n);
    key.replace(key.size() - 1 - digits.size(), digits.size(), digits);
    top.facts.client =
        *config::parse_ip("10." + std::to_string((n >> 16) & 255) + "." +
                          std::to_string((n >> 8) & 255) + "." + std::to_string(n & 255));
    top.count(key);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TopCountNewCallers);

// The same flood without the summary: what building a new caller's address alone costs, to
// subtract from the above.
void BM_TopCountNewCallersBaseline(benchmark::State& state) {
  std::string key = "fg:api:ip-burst:{00000000000000000000000000000000}";
  std::uint64_t n = 0;
  config::IpAddress client{};
  for (auto _ : state) {
    auto digits = std::to_string(++n);
    key.replace(key.size() - 1 - digits.size(), digits.size(), digits);
    client = *config::parse_ip("10." + std::to_string((n >> 16) & 255) + "." +
                               std::to_string((n >> 8) & 255) + "." + std::to_string(n & 255));
    benchmark::DoNotOptimize(client);
    benchmark::DoNotOptimize(key);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TopCountNewCallersBaseline);

// A deny list of N CIDRs (IPv4 /16 to /32 and IPv6 /32 to /64, random), looked up by random
// addresses, most of them on no list: one binary search over the folded ranges. N from 1k to
// 1M shows the growth (log n: each 10x adds about three or four comparisons).
struct DenyList {
  config::CidrSet set;
  std::vector<config::IpAddress> probes;
  explicit DenyList(std::int64_t n) {
    std::uint64_t x = 0x9e3779b97f4a7c15ULL;
    auto next = [&] {  // xorshift: the same list on every run
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      return x;
    };
    for (std::int64_t i = 0; i < n; ++i) {
      const auto r = next();
      std::string text =
          (i % 4 != 0)
              ? std::to_string(r & 255) + "." + std::to_string((r >> 8) & 255) + "." +
                    std::to_string((r >> 16) & 255) + "." + std::to_string((r >> 24) & 255) + "/" +
                    std::to_string(16 + (r >> 32) % 17)
              : "2001:db8:" + std::to_string((r >> 8) % 9999) + ":" +
                    std::to_string((r >> 24) % 9999) + "::/" + std::to_string(32 + (r >> 40) % 33);
      set.add(std::get<config::Cidr>(config::parse_cidr(text)));
    }
    set.seal();
    for (int i = 0; i < 4096; ++i) {
      const auto r = next();
      probes.push_back(*config::parse_ip(
          std::to_string(r & 255) + "." + std::to_string((r >> 8) & 255) + "." +
          std::to_string((r >> 16) & 255) + "." + std::to_string((r >> 24) & 255)));
    }
  }
};

void BM_DenyListLookup(benchmark::State& state) {
  DenyList list(state.range(0));
  std::size_t i = 0, hits = 0;
  for (auto _ : state) hits += list.set.contains(list.probes[i++ & 4095]);
  benchmark::DoNotOptimize(hits);
  state.SetItemsProcessed(state.iterations());
  state.counters["ranges"] = static_cast<double>(list.set.ranges());
}
BENCHMARK(BM_DenyListLookup)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Arg(1'000'000);

}  // namespace
