// A route's limits applied to one request: plan() (keys, costs, tiers, on_missing_key),
// verdict() (which limit's numbers the client sees), the rate-limit headers and 429 body, and
// the per-instance division of the `local` fallback.

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "fake_sources.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/limit/policy.hpp"

namespace config = floodgate::config;
namespace keys = floodgate::keys;
using floodgate::limit::Decision;
using floodgate::limit::divided;
using floodgate::limit::kMicrosPerSecond;
using floodgate::limit::Micros;
using floodgate::limit::Params;
using floodgate::limit::plan;
using floodgate::limit::Plan;
using floodgate::limit::rate_headers;
using floodgate::limit::refusal_body;
using floodgate::limit::retry_after_seconds;
using floodgate::limit::verdict;
using floodgate::store::Outcome;

namespace {

constexpr Micros kSecond = kMicrosPerSecond;

using floodgate::testing::Claims;
using floodgate::testing::Headers;

config::KeyPart key_part(config::KeyPart::Kind kind, std::string name = "") {
  config::KeyPart k;
  k.kind = kind;
  k.name = std::move(name);
  return k;
}

config::Limit bucket_limit(std::string name, std::int64_t capacity, double rate) {
  config::Limit l;
  l.name = std::move(name);
  l.algorithm = config::Algorithm::token_bucket;
  l.params.capacity = capacity;
  l.params.refill_rate.per_second = rate;
  l.key = {key_part(config::KeyPart::Kind::ip)};
  l.cost.max = capacity;
  return l;
}

config::Limit window_limit(std::string name, config::Algorithm a, std::int64_t limit,
                           config::Duration window) {
  config::Limit l;
  l.name = std::move(name);
  l.algorithm = a;
  l.params.limit = limit;
  l.params.window = window;
  l.key = {key_part(config::KeyPart::Kind::ip)};
  l.cost.max = limit;
  return l;
}

config::IpAddress address(const char* text) {
  return *config::parse_ip(text);
}

struct Fixture {
  config::Config config;
  config::Route route;
  keys::KeyHasher hasher{"test-secret"};
  Headers headers{};
  Claims claims{};
  keys::RequestFacts facts;

  Fixture() {
    config.store.key_prefix = "rl";
    route.name = "api";
    facts.route = "api";
    facts.method = "GET";
    facts.host = "api.example";
    facts.path = "/v1/items";
    facts.client = address("203.0.113.7");
    facts.headers = &headers;
    facts.claims = &claims;
  }
  Plan run() { return plan(config, route, facts, hasher); }
};

// ====================================================================== plan

TEST(Plan, OneItemPerLimitWithKeysParamsAndModes) {
  Fixture f;
  f.route.limits.push_back(bucket_limit("burst", 20, 10));
  f.route.limits.push_back(
      window_limit("minute", config::Algorithm::sliding_window, 100, std::chrono::seconds(60)));
  f.route.limits.back().mode = config::LimitMode::shadow;
  auto p = f.run();
  EXPECT_EQ(p.reject_status, 0);
  ASSERT_EQ(p.items.size(), 2u);
  ASSERT_EQ(p.limits.size(), 2u);
  EXPECT_EQ(p.limits[0], &f.route.limits[0]);
  EXPECT_EQ(p.limits[1], &f.route.limits[1]);
  EXPECT_TRUE(std::regex_match(p.items[0].key, std::regex(R"(rl:api:burst:\{[0-9a-f]{32}\})")))
      << p.items[0].key;
  EXPECT_TRUE(std::regex_match(p.items[1].key, std::regex(R"(rl:api:minute:\{[0-9a-f]{32}\})")))
      << p.items[1].key;
  EXPECT_EQ(p.items[0].params.algorithm, config::Algorithm::token_bucket);
  EXPECT_EQ(p.items[0].params.capacity, 20);
  EXPECT_DOUBLE_EQ(p.items[0].params.per_second, 10);
  EXPECT_EQ(p.items[1].params.capacity, 100);
  EXPECT_EQ(p.items[1].params.window, 60 * kSecond);
  EXPECT_EQ(p.items[0].cost, 1);
  EXPECT_TRUE(p.items[0].enforce);
  EXPECT_FALSE(p.items[1].enforce) << "mode: shadow";
}

struct CostCase {
  std::optional<std::string> header;  // nullopt: absent
  int status;                         // 0: planned
  std::int64_t cost;
};

TEST(Plan, CostFromAHeader) {
  const std::vector<CostCase> cases = {
      {std::nullopt, 0, 3},  // absent: default
      {"", 0, 3},            // empty: default
      {"7", 0, 7},
      {"0", 0, 0},
      {"50", 0, 50},
      {"51", 0, 50},                       // above max: clamped
      {"99999999999999999999999", 0, 50},  // too large for any integer: still clamped
      {"-1", 400, 0},
      {"-99999999999999999999999", 400, 0},  // negative, however long
      {"abc", 400, 0},
      {"1.5", 400, 0},
      {"+5", 400, 0},
      {"0x10", 400, 0},
      {"5 tokens", 400, 0},
      {"1e3", 400, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.header ? "X-Cost: \"" + *c.header + "\"" : std::string("no X-Cost"));
    Fixture f;
    auto l = bucket_limit("tokens", 100, 10);
    l.cost.from_header = "X-Cost";
    l.cost.fixed = 3;
    l.cost.max = 50;
    f.route.limits.push_back(l);
    if (c.header) f.headers = Headers{{"x-cost", *c.header}};
    auto p = f.run();
    EXPECT_EQ(p.reject_status, c.status);
    if (c.status == 0) {
      ASSERT_EQ(p.items.size(), 1u);
      EXPECT_EQ(p.items[0].cost, c.cost);
    } else {
      EXPECT_EQ(p.rejected_by, &f.route.limits[0]);
    }
  }
}

TEST(Plan, FixedCostAndConcurrencyAlwaysOne) {
  Fixture f;
  auto l = bucket_limit("fixed", 100, 10);
  l.cost.fixed = 5;
  f.route.limits.push_back(l);
  config::Limit conc;
  conc.name = "inflight";
  conc.algorithm = config::Algorithm::concurrency;
  conc.params.limit = 4;
  conc.key = {key_part(config::KeyPart::Kind::ip)};
  f.route.limits.push_back(conc);
  f.headers = Headers{{"X-Cost", "9"}};
  auto p = f.run();
  ASSERT_EQ(p.items.size(), 2u);
  EXPECT_EQ(p.items[0].cost, 5) << "no from: header, the header is not read";
  EXPECT_EQ(p.items[1].cost, 1);
  EXPECT_EQ(p.items[1].params.capacity, 4);
}

TEST(Plan, OnMissingKey) {
  auto api_key_limit = [](config::OnMissingKey m) {
    auto l = bucket_limit("per-key", 10, 1);
    l.key = {key_part(config::KeyPart::Kind::header, "x-api-key")};
    l.on_missing_key = m;
    return l;
  };
  EXPECT_EQ(config::Limit{}.on_missing_key, config::OnMissingKey::reject) << "the default";

  {  // reject: 401 at once, naming the limit
    Fixture f;
    f.route.limits.push_back(bucket_limit("ip", 10, 1));
    f.route.limits.push_back(api_key_limit(config::OnMissingKey::reject));
    auto p = f.run();
    EXPECT_EQ(p.reject_status, 401);
    EXPECT_EQ(p.rejected_by, &f.route.limits[1]);
  }
  {  // skip: the limit is not applied, the others are
    Fixture f;
    f.route.limits.push_back(bucket_limit("ip", 10, 1));
    f.route.limits.push_back(api_key_limit(config::OnMissingKey::skip));
    auto p = f.run();
    EXPECT_EQ(p.reject_status, 0);
    ASSERT_EQ(p.items.size(), 1u);
    EXPECT_EQ(p.limits[0]->name, "ip");
  }
  {  // shared: one bucket for every caller without the part
    Fixture f;
    f.route.limits.push_back(api_key_limit(config::OnMissingKey::shared));
    auto p = f.run();
    EXPECT_EQ(p.reject_status, 0);
    ASSERT_EQ(p.items.size(), 1u);
    EXPECT_EQ(p.items[0].key, "rl:api:per-key:{shared}");
    f.facts.client = address("198.51.100.1");
    EXPECT_EQ(f.run().items[0].key, "rl:api:per-key:{shared}") << "the same for everyone";
    f.headers = Headers{{"X-Api-Key", "k-123"}};
    auto with_key = f.run();
    ASSERT_EQ(with_key.items.size(), 1u);
    EXPECT_NE(with_key.items[0].key, "rl:api:per-key:{shared}");
  }
  {  // present: planned whatever the policy
    Fixture f;
    f.route.limits.push_back(api_key_limit(config::OnMissingKey::reject));
    f.headers = Headers{{"x-api-key", "k-123"}};
    auto p = f.run();
    EXPECT_EQ(p.reject_status, 0);
    EXPECT_EQ(p.items.size(), 1u);
  }
}

TEST(Plan, TiersByAVerifiedClaim) {
  auto tiered = [] {
    auto l =
        window_limit("tenant", config::Algorithm::sliding_window, 1000, std::chrono::seconds(60));
    l.key = {key_part(config::KeyPart::Kind::jwt, "tenant")};
    config::Overrides o;
    o.by = key_part(config::KeyPart::Kind::jwt, "tier");
    auto gold = l.params;
    gold.limit = 10000;
    auto free = l.params;
    free.limit = 100;
    free.window = std::chrono::seconds(3600);
    o.values = {{"gold", gold}, {"free", free}};
    l.overrides = o;
    return l;
  };
  struct Case {
    std::optional<std::string> tier;
    std::int64_t limit;
    Micros window;
  };
  for (const auto& c :
       std::vector<Case>{{"gold", 10000, 60 * kSecond},
                         {"free", 100, 3600 * kSecond},
                         {"platinum", 1000, 60 * kSecond},  // unknown tier: the base
                         {std::nullopt, 1000, 60 * kSecond}}) {
    SCOPED_TRACE(c.tier.value_or("(no tier claim)"));
    Fixture f;
    f.route.limits.push_back(tiered());
    if (c.tier)
      f.claims = Claims{{"tenant", "acme"}, {"tier", *c.tier}};
    else
      f.claims = Claims{{"tenant", "acme"}};
    auto p = f.run();
    ASSERT_EQ(p.items.size(), 1u);
    EXPECT_EQ(p.items[0].params.capacity, c.limit);
    EXPECT_EQ(p.items[0].params.window, c.window);
  }
  // The tier does not change the caller's bucket key.
  Fixture a, b;
  a.route.limits.push_back(tiered());
  b.route.limits.push_back(tiered());
  a.claims = Claims{{"tenant", "acme"}, {"tier", "gold"}};
  b.claims = Claims{{"tenant", "acme"}, {"tier", "free"}};
  EXPECT_EQ(a.run().items[0].key, b.run().items[0].key);
}

// A config from YAML text (no environment), or null with the first error reported.
config::ConfigPtr loaded(const char* yaml) {
  auto r =
      config::load_config_text(yaml, "plan.yaml", [](const std::string&) { return std::nullopt; });
  if (!r.config) ADD_FAILURE() << (r.errors.empty() ? "" : r.errors[0].to_string());
  return r.config;
}

TEST(Plan, FromALoadedConfig) {
  const char* yaml = R"(
server:
  listen: [127.0.0.1:0]
upstreams:
  origin: { url: http://127.0.0.1:9000 }
store:
  key_prefix: edge
  key_secret: s3cret-s3cret-s3cret-s3cret
routes:
  - name: llm
    match: { path_prefix: / }
    upstream: origin
    limits:
      - name: tokens
        algorithm: token_bucket
        capacity: 1000
        refill_rate: 0.5/s
        key: [ip]
        cost: { from: header:X-Estimated-Tokens, default: 10 }
)";
  const auto config = loaded(yaml);
  ASSERT_TRUE(config);
  const auto& route = config->routes.at(0);
  keys::KeyHasher hasher(config->store.key_secret);
  Headers headers{{"x-estimated-tokens", "5000"}};
  keys::RequestFacts facts;
  facts.route = route.name;
  facts.client = address("192.0.2.1");
  facts.headers = &headers;
  auto p = plan(*config, route, facts, hasher);
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].cost, 1000) << "max defaults to the capacity";
  EXPECT_DOUBLE_EQ(p.items[0].params.per_second, 0.5);
  EXPECT_EQ(p.items[0].key.rfind("edge:llm:tokens:{", 0), 0u) << p.items[0].key;
  Headers none{};
  facts.headers = &none;
  EXPECT_EQ(plan(*config, route, facts, hasher).items[0].cost, 10);
}

// on_exceed: delay is a wait (max_delay), not a number of units: a rate divided among
// instances (on_store_error: local) keeps the same longest wait, and a key a rollout leaves in
// shadow is never held.
TEST(Plan, ADelayIsAWaitThatFollowsTheRateAndSkipsShadowedKeys) {
  const char* yaml = R"(
server:
  listen: [127.0.0.1:0]
upstreams:
  origin: { url: http://127.0.0.1:9000 }
store: { key_secret: s3cret-s3cret-s3cret-s3cret }
routes:
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits:
      - { name: paced, algorithm: gcra, capacity: 10, refill_rate: 10/s, key: [ip],
          on_exceed: delay, max_delay: 2s, rollout: 50% }
)";
  const auto config = loaded(yaml);
  ASSERT_TRUE(config);
  const auto& route = config->routes.at(0);
  keys::KeyHasher hasher(config->store.key_secret);
  int enforced = 0, shadowed = 0;
  for (int i = 0; i < 64; ++i) {
    keys::RequestFacts facts;
    facts.route = route.name;
    facts.client = address(("192.0.2." + std::to_string(i)).c_str());
    const auto item = plan(*config, route, facts, hasher).items.at(0);
    if (item.enforce) {
      ++enforced;
      EXPECT_EQ(item.params.max_delay, 2 * kSecond);
      EXPECT_EQ(item.params.delay_allowance(), 20);
      EXPECT_EQ(divided(item.params, 4).delay_allowance(), 5) << "2 s at a quarter of the rate";
    } else {
      ++shadowed;
      EXPECT_EQ(item.params.max_delay, 0);
    }
  }
  EXPECT_GT(enforced, 10);
  EXPECT_GT(shadowed, 10);
}

// ====================================================================== verdict

Decision admitted(std::int64_t limit, std::int64_t remaining, Micros reset_after) {
  Decision d;
  d.admitted = true;
  d.limit = limit;
  d.remaining = remaining;
  d.reset_after = reset_after;
  return d;
}
Decision refused(std::int64_t limit, Micros retry_after, Micros reset_after = 0) {
  Decision d;
  d.admitted = false;
  d.limit = limit;
  d.retry_after = retry_after;
  d.reset_after = reset_after;
  return d;
}

Plan plan_of(std::vector<bool> enforce) {
  Plan p;
  for (bool e : enforce) {
    floodgate::store::Item i;
    i.enforce = e;
    p.items.push_back(i);
    p.limits.push_back(nullptr);
  }
  return p;
}

TEST(Verdict, RefusedShowsTheRefusingLimitWithTheLongestWait) {
  auto p = plan_of({true, true, true, false});
  Outcome o;
  o.admitted = false;
  o.decisions = {admitted(100, 50, 1 * kSecond), refused(10, 2 * kSecond), refused(20, 5 * kSecond),
                 refused(5, 100 * kSecond)};  // the shadow one waits longest, but is never shown
  auto v = verdict(p, o);
  EXPECT_FALSE(v.admitted);
  EXPECT_EQ(v.shown, 2);
  EXPECT_EQ(v.decision.retry_after, 5 * kSecond);
  EXPECT_EQ(v.decision.limit, 20);

  // Order does not matter.
  o.decisions = {refused(20, 5 * kSecond), refused(10, 2 * kSecond), admitted(100, 50, 1 * kSecond),
                 refused(5, 100 * kSecond)};
  v = verdict(p, o);
  EXPECT_EQ(v.shown, 0);
}

TEST(Verdict, AdmittedShowsTheLimitClosestToRefusal) {
  auto p = plan_of({true, true, false, true});
  Outcome o;
  o.admitted = true;
  o.decisions = {admitted(10, 5, 1 * kSecond),       // 50 % left
                 admitted(100, 30, 1 * kSecond),     // 30 % left: the closest
                 admitted(10, 0, 9 * kSecond),       // shadow: never shown
                 admitted(1000, 900, 1 * kSecond)};  // 90 %
  auto v = verdict(p, o);
  EXPECT_TRUE(v.admitted);
  EXPECT_EQ(v.shown, 1);
  EXPECT_EQ(v.decision.remaining, 30);

  // A tie on the share left: the one longest until whole.
  o.decisions = {admitted(10, 3, 2 * kSecond), admitted(100, 30, 8 * kSecond),
                 admitted(10, 0, 9 * kSecond), admitted(1000, 300, 4 * kSecond)};
  v = verdict(p, o);
  EXPECT_EQ(v.shown, 1);

  // A refusing shadow limit changes nothing.
  o.decisions[2] = refused(10, 60 * kSecond);
  v = verdict(p, o);
  EXPECT_TRUE(v.admitted);
  EXPECT_EQ(v.shown, 1);
}

TEST(Verdict, OnlyShadowLimitsShowNothing) {
  auto p = plan_of({false, false});
  Outcome o;
  o.admitted = true;
  o.decisions = {refused(10, 5 * kSecond), admitted(10, 1, 1 * kSecond)};
  auto v = verdict(p, o);
  EXPECT_TRUE(v.admitted);
  EXPECT_EQ(v.shown, -1);
  EXPECT_EQ(verdict(Plan{}, Outcome{true, {}}).shown, -1);
}

// ====================================================================== headers and body

using Headers_ = floodgate::limit::HeaderList;

std::optional<std::string> header(const Headers_& h, const std::string& name) {
  std::optional<std::string> out;
  for (const auto& [k, v] : h) {
    if (k != name) continue;
    EXPECT_FALSE(out.has_value()) << "duplicate " << name;
    out = v;
  }
  return out;
}

constexpr Micros kAt = 1'700'000'000LL * kSecond + 250'000;  // 1700000000.25 s

TEST(RateHeaders, TokenBucketAdmitted) {
  auto l = bucket_limit("ip-burst", 20, 10);
  Params p = Params::from(l, l.params);
  auto h = rate_headers(l, p, admitted(20, 17, 300'000), kAt);
  EXPECT_EQ(header(h, "X-RateLimit-Limit"), "20");
  EXPECT_EQ(header(h, "X-RateLimit-Remaining"), "17");
  EXPECT_EQ(header(h, "X-RateLimit-Reset"), "1700000001")
      << "Unix seconds when whole: ceil(now + reset)";
  EXPECT_EQ(header(h, "RateLimit-Policy"), "\"ip-burst\";q=20;w=2")
      << "20 tokens at 10/s: whole in 2 s";
  EXPECT_EQ(header(h, "RateLimit"), "\"ip-burst\";r=17;t=1");
  EXPECT_FALSE(header(h, "Retry-After").has_value());
  EXPECT_EQ(h.size(), 5u);
}

TEST(RateHeaders, SlowBucketPolicyWindow) {
  auto l = bucket_limit("slow", 3, 0.5);
  auto h = rate_headers(l, Params::from(l, l.params), admitted(3, 2, 2 * kSecond), kAt);
  EXPECT_EQ(header(h, "RateLimit-Policy"), "\"slow\";q=3;w=6");
  EXPECT_EQ(header(h, "RateLimit"), "\"slow\";r=2;t=2");
}

TEST(RateHeaders, WindowRefused) {
  auto l =
      window_limit("ip-minute", config::Algorithm::sliding_window, 100, std::chrono::seconds(60));
  Params p = Params::from(l, l.params);
  auto h = rate_headers(l, p, refused(100, 1'200'000, 119 * kSecond), kAt);
  EXPECT_EQ(header(h, "X-RateLimit-Limit"), "100");
  EXPECT_EQ(header(h, "X-RateLimit-Remaining"), "0");
  EXPECT_EQ(header(h, "X-RateLimit-Reset"), "1700000120");
  EXPECT_EQ(header(h, "RateLimit-Policy"), "\"ip-minute\";q=100;w=60");
  EXPECT_EQ(header(h, "RateLimit"), "\"ip-minute\";r=0;t=2") << "refused: t is the wait";
  EXPECT_EQ(header(h, "Retry-After"), "2") << "1.2 s rounds up to whole seconds";
}

TEST(RateHeaders, RetryAfterIsWholeSecondsAtLeastOne) {
  auto l = window_limit("w", config::Algorithm::fixed_window, 10, std::chrono::seconds(10));
  Params p = Params::from(l, l.params);
  struct Case {
    Micros retry;
    const char* expected;
  };
  for (auto [retry, expected] : std::vector<Case>{{1, "1"},
                                                  {300'000, "1"},
                                                  {1 * kSecond, "1"},
                                                  {1 * kSecond + 1, "2"},
                                                  {2 * kSecond, "2"},
                                                  {59 * kSecond + 999'999, "60"},
                                                  {0, "1"}}) {
    SCOPED_TRACE(retry);
    auto d = refused(10, retry, retry);
    EXPECT_EQ(header(rate_headers(l, p, d, kAt), "Retry-After"), expected);
    EXPECT_EQ(std::to_string(retry_after_seconds(d)), expected);
  }
}

TEST(RateHeaders, FixedWindowAndConcurrencyPolicies) {
  auto fw = window_limit("hourly", config::Algorithm::fixed_window, 5000, std::chrono::hours(1));
  auto h = rate_headers(fw, Params::from(fw, fw.params), admitted(5000, 4999, 1800 * kSecond), kAt);
  EXPECT_EQ(header(h, "RateLimit-Policy"), "\"hourly\";q=5000;w=3600");
  EXPECT_EQ(header(h, "RateLimit"), "\"hourly\";r=4999;t=1800");

  config::Limit conc;
  conc.name = "inflight";
  conc.algorithm = config::Algorithm::concurrency;
  conc.params.limit = 8;
  h = rate_headers(conc, Params::from(conc, conc.params), admitted(8, 7, 0), kAt);
  EXPECT_EQ(header(h, "RateLimit-Policy"), "\"inflight\";q=8") << "no window for concurrency";
  EXPECT_EQ(header(h, "X-RateLimit-Limit"), "8");
}

// Issue 34 item 9: an override of INT64_MAX made a bucket's remaining overflow to INT64_MIN,
// and the client saw it. Whatever a decision says, the headers never promise less than 0.
TEST(RateHeaders, RemainingIsNeverNegative) {
  auto l = bucket_limit("ip-burst", 20, 10);
  Params p = Params::from(l, l.params);
  auto h = rate_headers(l, p, admitted(20, std::numeric_limits<std::int64_t>::min(), kSecond), kAt);
  EXPECT_EQ(header(h, "X-RateLimit-Remaining"), "0");
  EXPECT_EQ(header(h, "RateLimit"), "\"ip-burst\";r=0;t=1");
}

TEST(RefusalBody, IsTheDocumentedJson) {
  auto l =
      window_limit("ip-minute", config::Algorithm::sliding_window, 100, std::chrono::seconds(60));
  auto body = refusal_body(l, refused(100, 1'200'000));
  EXPECT_EQ(body, R"({"error":"rate_limited","limit":"ip-minute","retry_after":2})");
  auto v = boost::json::parse(body).as_object();
  EXPECT_EQ(v.at("error").as_string(), "rate_limited");
  EXPECT_EQ(v.at("limit").as_string(), "ip-minute");
  EXPECT_EQ(v.at("retry_after").as_int64(), 2);
  EXPECT_EQ(refusal_body(l, refused(100, 10)),
            R"({"error":"rate_limited","limit":"ip-minute","retry_after":1})");
}

// ====================================================================== local fallback division

TEST(Divided, EachInstanceGetsCeilOfItsShare) {
  Params bucket;
  bucket.algorithm = config::Algorithm::token_bucket;
  bucket.capacity = 100;
  bucket.per_second = 10;
  auto d = divided(bucket, 3);
  EXPECT_EQ(d.capacity, 34);
  EXPECT_DOUBLE_EQ(d.per_second, 10.0 / 3);
  EXPECT_EQ(d.algorithm, config::Algorithm::token_bucket);
  EXPECT_EQ(divided(bucket, 4).capacity, 25);
  EXPECT_DOUBLE_EQ(divided(bucket, 4).per_second, 2.5);
  EXPECT_EQ(divided(bucket, 1).capacity, 100);
  EXPECT_DOUBLE_EQ(divided(bucket, 1).per_second, 10);
  EXPECT_EQ(divided(bucket, 0).capacity, 100) << "no division below 1";
  EXPECT_EQ(divided(bucket, 1000).capacity, 1) << "never 0";

  Params window;
  window.algorithm = config::Algorithm::sliding_window;
  window.capacity = 1000;
  window.window = 60 * kSecond;
  auto w = divided(window, 7);
  EXPECT_EQ(w.capacity, 143);
  EXPECT_EQ(w.window, 60 * kSecond) << "the window is not divided";
}

}  // namespace

// `rollout: P%`: a key's bucket is fixed, about P% of keys fall below P x 100, and raising P
// only adds keys.
TEST(Rollout, BucketsSpreadKeysEvenlyAndRaisingTheShareOnlyAddsKeys) {
  using floodgate::limit::rollout_bucket;
  constexpr int kKeys = 20000;
  config::Limit ten, quarter;
  ten.rollout_basis_points = 1000;
  quarter.rollout_basis_points = 2500;
  int at10 = 0, at25 = 0, lost = 0;
  std::vector<int> per_decile(10, 0);
  for (int i = 0; i < kKeys; ++i) {
    const auto key = "rl:api:per-ip:{" + std::to_string(i * 7919) + "}";
    const int b = rollout_bucket(key);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, 10000);
    EXPECT_EQ(b, rollout_bucket(key));  // the same every time
    ++per_decile[static_cast<std::size_t>(b / 1000)];
    const bool in10 = floodgate::limit::enforced(ten, key);
    const bool in25 = floodgate::limit::enforced(quarter, key);
    at10 += in10;
    at25 += in25;
    lost += in10 && !in25;
  }
  EXPECT_EQ(lost, 0);
  EXPECT_NEAR(at10, kKeys / 10, kKeys / 100);  // 10% +- 1 point
  EXPECT_NEAR(at25, kKeys / 4, kKeys / 100);
  for (int n : per_decile) EXPECT_NEAR(n, kKeys / 10, kKeys / 100);
  EXPECT_EQ(config::format_rollout(1000), "10%");
  EXPECT_EQ(config::format_rollout(50), "0.5%");
  EXPECT_EQ(config::format_rollout(1234), "12.34%");
}
