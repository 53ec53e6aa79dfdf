// The protocol-free decision (decide::Decider): each way the steps before the store end
// (lists, no limits, a key part missing, an override's exemption, the store's turn), lease
// ids, the key secret, and what a store's outcome concludes. No HTTP anywhere: an Inquiry is
// plain facts, as the proxy, replay and (next) Envoy's RLS fill it.

#include <gtest/gtest.h>

#include <string>

#include "fake_sources.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/decide/decider.hpp"

namespace config = floodgate::config;
namespace decide = floodgate::decide;
namespace keys = floodgate::keys;
namespace limit = floodgate::limit;
using floodgate::testing::Headers;

namespace {

const char* kYaml = R"(
server:
  listen: [127.0.0.1:0]
upstreams:
  origin: { url: http://127.0.0.1:9000 }
store:
  key_secret: s3cret-s3cret-s3cret-s3cret
lists:
  deny: { cidrs: [198.51.100.0/24] }
  allow: { cidrs: [10.0.0.0/8] }
routes:
  - name: open
    match: { path_prefix: /open }
    upstream: origin
  - name: api
    match: { path_prefix: /api }
    upstream: origin
    path_template: /api/items/{id}
    limits:
      - name: per-ip
        algorithm: token_bucket
        capacity: 10
        refill_rate: 1/s
        key: [ip]
      - name: per-key
        algorithm: fixed_window
        limit: 5
        window: 1m
        key: ["header:X-Api-Key"]
        on_missing_key: skip
      - name: slots
        algorithm: concurrency
        limit: 2
        key: [ip]
        mode: shadow
)";

config::ConfigPtr loaded() {
  auto r = config::load_config_text(kYaml, "decider.yaml",
                                    [](const std::string&) { return std::nullopt; });
  if (!r.config) ADD_FAILURE() << (r.errors.empty() ? "" : r.errors[0].to_string());
  return r.config;
}

struct Ask {
  config::ConfigPtr config = loaded();
  Headers headers{};
  decide::Inquiry q;
  Ask(const char* route, const char* client, std::string_view path = "/api/items/7") {
    for (const auto& r : config->routes)
      if (r.name == route) q.route = &r;
    q.config = config.get();
    q.facts.route = q.route->name;
    q.facts.method = "GET";
    q.facts.host = "example.com";
    q.facts.path = path;
    q.facts.client = *config::parse_ip(client);
    q.facts.headers = &headers;
    q.now = 1'700'000'000'000'000;
    decide::complete(q);
  }
};

}  // namespace

TEST(Decider, ListsComeBeforeLimitsAndDenyWins) {
  decide::Decider d(keys::KeyHasher::Kind::hmac, "i:0:");
  limit::Plan plan;
  EXPECT_EQ(d.rule(Ask("api", "198.51.100.9").q, plan, nullptr), decide::Ruling::denied);
  EXPECT_EQ(d.rule(Ask("api", "10.1.2.3").q, plan, nullptr), decide::Ruling::allowed);
  EXPECT_EQ(d.rule(Ask("open", "198.51.100.9").q, plan, nullptr), decide::Ruling::denied)
      << "lists apply to routes without limits too";
  EXPECT_EQ(d.rule(Ask("open", "192.0.2.1").q, plan, nullptr), decide::Ruling::unlimited);
}

TEST(Decider, AskTheStoreWithOneItemPerLimitThatApplies) {
  decide::Decider d(keys::KeyHasher::Kind::hmac, "i:0:");
  limit::Plan plan;
  Ask ask("api", "192.0.2.1");
  EXPECT_EQ(ask.q.facts.path_template, "/api/items/{id}") << "complete() finds the template";
  ASSERT_EQ(d.rule(ask.q, plan, nullptr), decide::Ruling::ask);
  // per-key is skipped without X-Api-Key; the concurrency limit needs a lease id.
  ASSERT_EQ(plan.items.size(), 2u);
  EXPECT_EQ(plan.limits[0]->name, "per-ip");
  EXPECT_EQ(plan.limits[1]->name, "slots");
  EXPECT_EQ(plan.items[0].lease, "i:0:1");
  ASSERT_EQ(d.rule(ask.q, plan, nullptr), decide::Ruling::ask);
  EXPECT_EQ(plan.items[1].lease, "i:0:2") << "each request its own id";

  Ask keyed("api", "192.0.2.1");
  keyed.headers = Headers{{"X-Api-Key", "k1"}};
  ASSERT_EQ(d.rule(keyed.q, plan, nullptr), decide::Ruling::ask);
  EXPECT_EQ(plan.items.size(), 3u) << "a plan reused keeps nothing of the last request";
}

TEST(Decider, AnOverrideMayExemptTheCallerFromEveryLimit) {
  decide::Decider d(keys::KeyHasher::Kind::hmac, "i:0:");
  Ask ask("api", "192.0.2.1");
  limit::OverrideList list;
  for (const char* l : {"per-ip", "slots"})
    list.push_back({.limit = l, .caller = "ip=192.0.2.1", .exempt = true});
  limit::OverrideIndex index;
  index.build(*ask.config, list, d.hasher(*ask.config));
  limit::Plan plan;
  EXPECT_EQ(d.rule(ask.q, plan, &index), decide::Ruling::exempt);
  EXPECT_EQ(d.rule(Ask("api", "192.0.2.2").q, plan, &index), decide::Ruling::ask)
      << "another caller is not exempt";
}

TEST(Decider, KeysAreTheProxysUnderTheKeySecretAndReplaysAreTheirOwn) {
  decide::Decider proxy(keys::KeyHasher::Kind::hmac, "i:0:");
  decide::Decider again(keys::KeyHasher::Kind::hmac, "i:1:");
  decide::Decider replay(keys::KeyHasher::Kind::offline, "replay:");
  Ask ask("api", "192.0.2.1");
  limit::Plan a, b, c;
  ASSERT_EQ(proxy.rule(ask.q, a, nullptr), decide::Ruling::ask);
  ASSERT_EQ(again.rule(ask.q, b, nullptr), decide::Ruling::ask);
  ASSERT_EQ(replay.rule(ask.q, c, nullptr), decide::Ruling::ask);
  EXPECT_EQ(a.items[0].key, b.items[0].key) << "every instance keys a caller alike";
  EXPECT_NE(a.items[0].key, c.items[0].key) << "replay's keys are a fast hash, never HMACs";
}

TEST(Decider, ConcludesRefusedByTheEnforcingLimitAndNotesAShadowOne) {
  decide::Decider d(keys::KeyHasher::Kind::hmac, "i:0:");
  Ask ask("api", "192.0.2.1");
  limit::Plan plan;
  ASSERT_EQ(d.rule(ask.q, plan, nullptr), decide::Ruling::ask);
  floodgate::store::Outcome o;
  o.decisions.resize(2);
  o.decisions[0].admitted = true;
  o.decisions[0].limit = 10;
  o.decisions[0].remaining = 3;
  o.decisions[1].admitted = false;  // the shadow concurrency limit
  o.admitted = true;
  auto c = decide::Decider::conclude(plan, o);
  EXPECT_TRUE(c.verdict.admitted);
  EXPECT_EQ(c.verdict.shown, 0);
  EXPECT_TRUE(c.shadow_refused);
  EXPECT_FALSE(c.inconsistent);

  o.decisions[0].admitted = false;
  o.admitted = false;
  c = decide::Decider::conclude(plan, o);
  EXPECT_FALSE(c.verdict.admitted);
  EXPECT_EQ(c.verdict.shown, 0);

  o.decisions[0].admitted = true;  // refused, yet every enforcing limit admitted
  c = decide::Decider::conclude(plan, o);
  EXPECT_TRUE(c.inconsistent);
}
