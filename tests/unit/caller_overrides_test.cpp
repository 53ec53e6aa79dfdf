// The admin API's pieces without sockets (issue 20 item 2): a caller's text as /top shows it
// leads back to the very store key its requests use; overrides read and written as JSON, and
// applied to a plan; admin tokens checked when the config loads and never shown by /config.
#include <gtest/gtest.h>

#include "admin/admin_server.hpp"
#include "fake_sources.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/keys/caller_key.hpp"
#include "floodgate/limit/caller_overrides.hpp"

namespace {

using namespace floodgate;

config::ConfigPtr load_with(const std::string& yaml) {
  auto r = config::load_config_text(yaml, "c.yaml", config::process_env());
  std::string errors;
  for (const auto& e : r.errors) errors += e.to_string() + "\n";
  EXPECT_TRUE(r.config) << errors;
  return r.config;
}

const std::string kHead =
    "server: { listen: [127.0.0.1:8080] }\n"
    "upstreams: { origin: { url: \"http://127.0.0.1:9000\" } }\n"
    "store: { key_secret: caller-override-test-secret-01234 }\n"
    "jwt: { algorithms: [HS256], hs256_secret: a-jwt-secret-for-these-tests-0123 }\n";

TEST(CallerKey, TheTextTopShowsLeadsBackToTheKeyRequestsUse) {
  auto c = load_with(
      kHead +
      "routes:\n  - name: api\n    match: { path_prefix: / }\n    upstream: origin\n"
      "    limits:\n"
      "      - { name: mixed, algorithm: fixed_window, limit: 5, window: 1m,"
      " key: [ip, \"header:X-Api-Key\", method, \"jwt:tenant\", \"query:p\", host, path] }\n"
      "      - { name: all, algorithm: fixed_window, limit: 5, window: 1m, key: [route] }\n"
      "      - { name: shared, algorithm: fixed_window, limit: 5, window: 1m,"
      " key: [\"header:X-User\"], on_missing_key: shared }\n");
  const auto& route = c->routes[0];
  keys::KeyHasher hasher(c->store.key_secret);
  // A value with a space and a byte /top escapes, an IPv6 client.
  floodgate::testing::Headers headers{{"X-Api-Key", "key with\x01space"}};
  floodgate::testing::Claims claims{{"tenant", "acme"}};
  keys::RequestFacts facts{"api",    "POST",    "Shop.Example",
                           "/v1/x",  "a=1&p=7", *config::parse_ip("2001:db8::1"),
                           &headers, &claims};
  for (const auto& limit : route.limits) {
    std::string caller;
    keys::append_caller_text(caller, limit, facts);
    if (limit.name == "mixed") {
      EXPECT_EQ(caller,
                "ip=2001:db8::1 header:X-Api-Key=key with\\x01space jwt:tenant=acme query:p=7 "
                "host=shop.example path=/v1/x");
      caller += " method=POST";  // /top leaves the method out; the API takes it last
    }
    auto expected = keys::build_key(c->store.key_prefix, route, limit, facts, hasher);
    auto k = keys::caller_key(c->store.key_prefix, route, limit, caller, hasher);
    EXPECT_EQ(k.key, expected.key) << limit.name << ": " << caller << " " << k.error;
  }
  // The shared bucket of callers without the part.
  floodgate::testing::Headers none{};
  keys::RequestFacts anonymous{"api", "GET",  "", "/", "", *config::parse_ip("10.0.0.1"),
                               &none, &claims};
  std::string text;
  keys::append_caller_text(text, route.limits[2], anonymous);
  EXPECT_EQ(text, "header:X-User=(missing: shared)");
  EXPECT_EQ(keys::caller_key(c->store.key_prefix, route, route.limits[2], text, hasher).key,
            keys::build_key(c->store.key_prefix, route, route.limits[2], anonymous, hasher).key);
  // What does not fit says why.
  auto wrong = keys::caller_key(c->store.key_prefix, route, route.limits[0], "ip=10.0.0.1", hasher);
  EXPECT_TRUE(wrong.key.empty());
  EXPECT_NE(wrong.error.find("header:X-Api-Key="), std::string::npos) << wrong.error;
  EXPECT_NE(keys::caller_key(c->store.key_prefix, route, route.limits[0],
                             "ip=10.0.0.300 header:X-Api-Key=k jwt:tenant=a query:p=1 host=h "
                             "path=/ method=GET",
                             hasher)
                .error.find("is not an IP address"),
            std::string::npos);
}

// Issue 34 item 8: /top escaped bytes as \xHH but left the backslash as it was, so the value
// `\x41-literal` showed as the text of the caller `A-literal`, and an override copied from
// /top hit that other caller. The backslash is escaped too: each text is one caller's.
TEST(CallerKey, ABackslashInAValueIsEscapedSoTheTextReadsBackToThatCallerOnly) {
  auto c = load_with(kHead +
                     "routes:\n  - name: api\n    match: { path_prefix: / }\n    upstream: origin\n"
                     "    limits:\n"
                     "      - { name: per-user, algorithm: fixed_window, limit: 5, window: 1m,"
                     " key: [\"header:X-User\"] }\n");
  const auto& route = c->routes[0];
  const auto& limit = route.limits[0];
  keys::KeyHasher hasher(c->store.key_secret);
  auto facts_of = [](const floodgate::testing::Headers& headers) {
    return keys::RequestFacts{"api", "GET", "", "/", "", *config::parse_ip("10.0.0.1"), &headers};
  };
  const floodgate::testing::Headers literal{{"X-User", "\\x41-literal"}};
  const floodgate::testing::Headers letter{{"X-User", "A-literal"}};
  const floodgate::testing::Headers mixed{{"X-User", std::string("a\\b\x01") + "c"}};
  std::string text;
  keys::append_caller_text(text, limit, facts_of(literal));
  EXPECT_EQ(text, "header:X-User=\\x5cx41-literal");
  const auto read_back = keys::caller_key(c->store.key_prefix, route, limit, text, hasher);
  EXPECT_EQ(read_back.key,
            keys::build_key(c->store.key_prefix, route, limit, facts_of(literal), hasher).key)
      << read_back.error;
  EXPECT_NE(read_back.key,
            keys::build_key(c->store.key_prefix, route, limit, facts_of(letter), hasher).key);
  // The other caller's text is its own, and so is one with a backslash and a control byte.
  text.clear();
  keys::append_caller_text(text, limit, facts_of(letter));
  EXPECT_EQ(text, "header:X-User=A-literal");
  text.clear();
  keys::append_caller_text(text, limit, facts_of(mixed));
  EXPECT_EQ(text, "header:X-User=a\\x5cb\\x01c");
  EXPECT_EQ(keys::caller_key(c->store.key_prefix, route, limit, text, hasher).key,
            keys::build_key(c->store.key_prefix, route, limit, facts_of(mixed), hasher).key);
}

TEST(CallerOverrides, JsonBothWaysAndWhatIsNotAnOverride) {
  limit::OverrideList list{
      {"burst", "ip=10.0.0.1", 0, true, 1'800'000'000'000'000, "oncall", 1'700'000'000'000'000},
      {"burst", "ip=10.0.0.2", 50, false, 0, "deploy", 0}};
  const auto text = limit::to_json(list);
  EXPECT_EQ(
      text,
      R"({"overrides":[{"limit":"burst","key":"ip=10.0.0.1","exempt":true,"until_ms":1800000000000,"by":"oncall","at_ms":1700000000000},)"
      R"({"limit":"burst","key":"ip=10.0.0.2","quota":50,"by":"deploy"}]})");
  std::string why;
  auto back = limit::overrides_from_json(text, why);
  ASSERT_TRUE(back) << why;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_TRUE((*back)[0].exempt);
  EXPECT_EQ((*back)[0].until, 1'800'000'000'000'000);
  EXPECT_EQ((*back)[1].quota, 50);
  EXPECT_FALSE(limit::overrides_from_json("[]", why));
  EXPECT_NE(why.find("GET /overrides"), std::string::npos);
  EXPECT_FALSE(
      limit::overrides_from_json(R"({"overrides":[{"limit":"l","key":"ip=1.2.3.4"}]})", why));
  EXPECT_EQ(why,
            "overrides[0]: an override is either {\"exempt\": true} or {\"limit\": N} with N >= 1");
  EXPECT_FALSE(limit::override_from_json("{not json", why));
}

// Issue 34 item 9: an override read back (from the store, or a file given to replay) is
// bounded as the admin API and the config bound a limit: 2^50, never INT64_MAX.
TEST(CallerOverrides, AQuotaPastTheConfigsBoundIsNotAnOverride) {
  std::string why;
  EXPECT_TRUE(limit::override_from_json(
      R"({"limit":"burst","key":"ip=10.0.0.1","quota":1125899906842624})", why))
      << why;
  EXPECT_FALSE(limit::override_from_json(
      R"({"limit":"burst","key":"ip=10.0.0.1","quota":1125899906842625})", why));
  EXPECT_FALSE(limit::override_from_json(
      R"({"limit":"burst","key":"ip=10.0.0.1","quota":9223372036854775807})", why));
  EXPECT_EQ(why, "\"quota\" must be at most 1125899906842624");
}

TEST(CallerOverrides, AnExemptionLeavesThePlanAndAQuotaKeepsTheRefillTime) {
  limit::Plan plan;
  config::Limit la, lb, lc;
  plan.limits = {&la, &lb, &lc};
  plan.items.resize(3);
  plan.items[0].key = "ka";
  plan.items[1].key = "kb";
  plan.items[1].params.capacity = 10;
  plan.items[1].params.per_second = 2;
  plan.items[1].leased.size = 5;
  plan.items[2].key = "kc";
  limit::OverrideIndex index;
  auto c =
      load_with(kHead +
                "routes:\n  - name: r\n    match: { path_prefix: / }\n    upstream: origin\n"
                "    limits: [{ name: a, algorithm: token_bucket, capacity: 10, refill_rate: 2/s, "
                "key: [ip] }]\n");
  keys::KeyHasher hasher(c->store.key_secret);
  limit::OverrideList real{{"a", "ip=10.0.0.1", 0, true, 0, "", 0}};
  index.build(*c, real, hasher);
  ASSERT_EQ(index.keys().size(), 1u);
  const auto exempt_key = index.keys().begin()->first;
  limit::OverrideList quota{{"a", "ip=10.0.0.1", 20, false, 100, "", 0}};
  limit::OverrideIndex quota_index;
  quota_index.build(*c, quota, hasher);

  plan.items[0].key = exempt_key;
  index.apply(plan, 0);
  ASSERT_EQ(plan.items.size(), 2u);  // the exempt item is gone, the others in order
  EXPECT_EQ(plan.items[0].key, "kb");
  EXPECT_EQ(plan.limits[0], &lb);
  plan.items[0].key = exempt_key;
  plan.items[0].cost = 50;  // more than the caller's quota could ever hold
  quota_index.apply(plan, 50);
  EXPECT_EQ(plan.items[0].params.capacity, 20);
  EXPECT_EQ(plan.items[0].cost, 20);
  EXPECT_DOUBLE_EQ(plan.items[0].params.per_second, 4);  // 20 in 5 s, as 10 in 5 s before
  EXPECT_EQ(plan.items[0].leased.size, 0);               // decided exactly
  plan.items[0].params.capacity = 10;
  quota_index.apply(plan, 100);  // lapsed at `until`
  EXPECT_EQ(plan.items[0].params.capacity, 10);
}

TEST(AdminTokens, CheckedWhenLoadedAndNeverShown) {
  auto r = config::load_config_text(
      kHead + "admin: { listen: 127.0.0.1:9901, token: short }\nroutes: []\n", "c.yaml",
      config::process_env());
  std::string errors;
  for (const auto& e : r.errors) errors += e.to_string() + "\n";
  EXPECT_NE(errors.find("admin.token: is 5 characters; an admin token needs at least 16"),
            std::string::npos)
      << errors;
  r = config::load_config_text(
      kHead +
          "admin: { listen: 127.0.0.1:9901, tokens: { oncall: "
          "oncall-secret-0123456789, deploy: oncall-secret-0123456789 } }\n"
          "routes:\n  - name: r\n    match: { path_prefix: / }\n    upstream: origin\n",
      "c.yaml", config::process_env());
  errors.clear();
  for (const auto& e : r.errors) errors += e.to_string() + "\n";
  EXPECT_NE(errors.find("admin.tokens.deploy: is the same as token \"oncall\""), std::string::npos)
      << errors;
  auto c =
      load_with(kHead +
                "admin: { listen: 127.0.0.1:9901, tokens: { oncall: oncall-secret-0123456789 } }\n"
                "routes:\n  - name: r\n    match: { path_prefix: / }\n    upstream: origin\n");
  ASSERT_EQ(c->admin.tokens.size(), 1u);
  auto shown = admin::redacted_config_json(*c);
  EXPECT_NE(shown.find("\"api_tokens\":[\"oncall\"]"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("oncall-secret"), std::string::npos);
}

}  // namespace
