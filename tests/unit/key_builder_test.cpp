// Store keys: "<prefix>:<route>:<limit>:{<keyed hash of the parts>}". Parts are length-prefixed
// so that no two different callers share a key; the caller's identity is never stored raw.

#include <gtest/gtest.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "fake_sources.hpp"
#include "floodgate/config/address.hpp"
#include "floodgate/keys/key_builder.hpp"

namespace config = floodgate::config;
using floodgate::keys::build_key;
using floodgate::keys::BuiltKey;
using floodgate::keys::ClaimSource;
using floodgate::keys::HeaderSource;
using floodgate::keys::KeyHasher;
using floodgate::keys::part_value;
using floodgate::keys::query_param;
using floodgate::keys::RequestFacts;
using Kind = config::KeyPart::Kind;

namespace {

using floodgate::testing::Claims;
using floodgate::testing::Headers;

config::KeyPart part(Kind kind, std::string name = "") {
  config::KeyPart k;
  k.kind = kind;
  k.name = std::move(name);
  return k;
}

config::Limit limit(std::string name, std::vector<config::KeyPart> parts,
                    config::OnMissingKey missing = config::OnMissingKey::reject) {
  config::Limit l;
  l.name = std::move(name);
  l.key = std::move(parts);
  l.on_missing_key = missing;
  return l;
}

config::Route route(std::string name) {
  config::Route r;
  r.name = std::move(name);
  return r;
}

RequestFacts facts(const HeaderSource* h = nullptr, const ClaimSource* c = nullptr) {
  RequestFacts f;
  f.route = "api";
  f.method = "GET";
  f.host = "api.example";
  f.path = "/v1/items";
  f.query = "page=2&user=alice";
  f.client = *config::parse_ip("203.0.113.7");
  f.headers = h;
  f.claims = c;
  return f;
}

std::string key_of(const config::Limit& l, const RequestFacts& f,
                   const std::string& secret = "secret-1") {
  KeyHasher h(secret);
  auto k = build_key("rl", route("api"), l, f, h);
  EXPECT_FALSE(k.missing);
  return k.key;
}

const std::regex kKeyFormat(R"(rl:api:([A-Za-z0-9._-]+):\{[0-9a-f]{32}\})");

// ---------------------------------------------------------------- the hasher

TEST(KeyHasher, IsHmacSha256TruncatedTo128Bits) {
  // RFC 4231 test case 2: HMAC-SHA256("Jefe", "what do ya want for nothing?").
  KeyHasher h("Jefe");
  EXPECT_EQ(h.hex("what do ya want for nothing?"), "5bdcc146bf60754e6a042426089575c7");
  // The context is reused: the same answer again, and for other material.
  EXPECT_EQ(h.hex("what do ya want for nothing?"), "5bdcc146bf60754e6a042426089575c7");
  for (const std::string& material :
       std::vector<std::string>{"", "a", std::string(1000, 'x'), std::string("nul\0byte", 8)}) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), "Jefe", 4, reinterpret_cast<const unsigned char*>(material.data()),
         material.size(), mac, &len);
    std::string expected;
    static const char* digits = "0123456789abcdef";
    for (int i = 0; i < 16; ++i) {
      expected += digits[mac[i] >> 4];
      expected += digits[mac[i] & 15];
    }
    EXPECT_EQ(h.hex(material), expected) << material.size() << " bytes";
  }
  EXPECT_EQ(h.secret(), "Jefe");
}

// Recent digests are remembered (a flood from one caller hashes once): whatever is
// remembered, evicted or colliding, every answer is the one a fresh hasher gives.
TEST(KeyHasher, RememberedDigestsAreTheComputedOnes) {
  KeyHasher warm("memo-secret");
  std::vector<std::string> materials;
  for (int i = 0; i < 5000; ++i) materials.push_back("route:limit:" + std::to_string(i * 7919));
  std::vector<std::string> first;
  for (const auto& m : materials) first.push_back(warm.hex(m));
  for (int round = 0; round < 3; ++round)
    for (std::size_t i = 0; i < materials.size(); i += 1 + static_cast<std::size_t>(round)) {
      if (i % 97 == 0) {
        KeyHasher fresh("memo-secret");
        ASSERT_EQ(fresh.hex(materials[i]), first[i]) << i;
      }
      ASSERT_EQ(warm.hex(materials[i]), first[i]) << i;
      // A material that differs in one byte from a remembered one is not taken for it.
      auto near = materials[i];
      near.back() ^= 1;
      ASSERT_NE(warm.hex(near), first[i]) << i;
    }
}

TEST(KeyHasher, SecretMatters) {
  KeyHasher a("secret-1"), b("secret-2");
  EXPECT_NE(a.hex("203.0.113.7"), b.hex("203.0.113.7"));
  EXPECT_NE(a.hex("203.0.113.7"), a.hex("203.0.113.8"));
}

// ---------------------------------------------------------------- keys

TEST(BuildKey, Format) {
  auto l = limit("per-ip", {part(Kind::ip)});
  auto k = key_of(l, facts());
  std::smatch m;
  ASSERT_TRUE(std::regex_match(k, m, kKeyFormat)) << k;
  EXPECT_EQ(m[1], "per-ip");

  KeyHasher h("s");
  auto other =
      build_key("edge.fra1", route("checkout"), limit("ip-minute", {part(Kind::ip)}), facts(), h);
  EXPECT_TRUE(
      std::regex_match(other.key, std::regex(R"(edge\.fra1:checkout:ip-minute:\{[0-9a-f]{32}\})")))
      << other.key;
}

TEST(BuildKey, DeterministicAndSeparatedByCaller) {
  auto l = limit("per-ip", {part(Kind::ip)});
  EXPECT_EQ(key_of(l, facts()), key_of(l, facts()));
  auto f2 = facts();
  f2.client = *config::parse_ip("203.0.113.8");
  EXPECT_NE(key_of(l, facts()), key_of(l, f2));
  // Only the parts named count: another path is the same caller for an [ip] key.
  auto f3 = facts();
  f3.path = "/elsewhere";
  f3.method = "POST";
  EXPECT_EQ(key_of(l, facts()), key_of(l, f3));
}

TEST(BuildKey, DifferentSecretDifferentKey) {
  auto l = limit("per-ip", {part(Kind::ip)});
  EXPECT_NE(key_of(l, facts(), "secret-1"), key_of(l, facts(), "secret-2"));
}

TEST(BuildKey, DifferentLimitOrRouteDifferentKey) {
  KeyHasher h("s");
  auto a = build_key("rl", route("api"), limit("a", {part(Kind::ip)}), facts(), h).key;
  auto b = build_key("rl", route("api"), limit("b", {part(Kind::ip)}), facts(), h).key;
  auto c = build_key("rl", route("web"), limit("a", {part(Kind::ip)}), facts(), h).key;
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  // The hashed caller part (the Redis Cluster hash tag) is the same for one caller.
  EXPECT_EQ(a.substr(a.find('{')), b.substr(b.find('{')));
}

TEST(BuildKey, NoRawClientIdentifier) {
  Headers h{{"X-Api-Key", "sk_live_abcdef"}, {"X-User", "alice@example.com"}};
  Claims c{{"tenant", "acme-corp"}};
  auto f = facts(&h, &c);
  f.client = *config::parse_ip("2001:db8::42");
  for (const auto& l :
       {limit("ip", {part(Kind::ip)}), limit("key", {part(Kind::header, "x-api-key")}),
        limit("user", {part(Kind::header, "x-user"), part(Kind::ip)}),
        limit("tenant", {part(Kind::jwt, "tenant")}), limit("q", {part(Kind::query, "user")})}) {
    auto k = key_of(l, f);
    ASSERT_TRUE(std::regex_match(k, kKeyFormat)) << k;
    for (const char* raw :
         {"2001:db8", "2001", "sk_live", "abcdef", "alice", "example.com", "acme"})
      EXPECT_EQ(k.find(raw), std::string::npos) << k << " contains " << raw;
  }
  auto v4 = facts();
  auto k = key_of(limit("ip", {part(Kind::ip)}), v4);
  EXPECT_EQ(k.find("203.0.113.7"), std::string::npos);
  EXPECT_EQ(k.find("203"), std::string::npos);
}

TEST(BuildKey, LengthPrefixingPreventsCollisions) {
  auto two = limit("two", {part(Kind::header, "a"), part(Kind::header, "b")});
  struct Pair {
    const char* a1;
    const char* b1;
    const char* a2;
    const char* b2;
  };
  for (auto [a1, b1, a2, b2] : std::vector<Pair>{{"a:b", "c", "a", "b:c"},
                                                 {"1", "23", "12", "3"},
                                                 {"x", "1:y", "x1", ":y"},
                                                 {"ab", "c", "a", "bc"},
                                                 {"5:", "x", "5", ":x"}}) {
    Headers h1{{"a", a1}, {"b", b1}};
    Headers h2{{"a", a2}, {"b", b2}};
    EXPECT_NE(key_of(two, facts(&h1)), key_of(two, facts(&h2)))
        << "(" << a1 << ", " << b1 << ") vs (" << a2 << ", " << b2 << ")";
  }
  // The part's kind and name count too: the same value under another name is another caller.
  Headers h{{"a", "v"}, {"b", "v"}};
  auto f = facts(&h);
  f.query = "a=v";
  std::set<std::string> keys;
  for (const auto& parts : std::vector<std::vector<config::KeyPart>>{
           {part(Kind::header, "a")},
           {part(Kind::header, "b")},
           {part(Kind::query, "a")},
           {part(Kind::header, "a"), part(Kind::header, "b")},
           {part(Kind::header, "b"), part(Kind::header, "a")}})
    keys.insert(key_of(limit("l", parts), f));
  EXPECT_EQ(keys.size(), 5u);
  // A value that spells another part's encoding cannot impersonate it.
  Headers spoof{{"a", "v1:b1:v"}};
  EXPECT_NE(key_of(limit("l", {part(Kind::header, "a")}), facts(&spoof)),
            key_of(limit("l", {part(Kind::header, "a"), part(Kind::header, "b")}), f));
}

TEST(BuildKey, HostIsCaseInsensitive) {
  auto l = limit("per-host", {part(Kind::host)});
  auto a = facts(), b = facts();
  a.host = "API.Example";
  b.host = "api.example";
  EXPECT_EQ(key_of(l, a), key_of(l, b));
}

TEST(BuildKey, MissingPartsFollowOnMissingKey) {
  Headers none{};
  KeyHasher h("s");
  auto l = limit("per-key", {part(Kind::ip), part(Kind::header, "x-api-key")});
  for (auto m : {config::OnMissingKey::reject, config::OnMissingKey::skip}) {
    l.on_missing_key = m;
    auto k = build_key("rl", route("api"), l, facts(&none), h);
    EXPECT_TRUE(k.missing);
    EXPECT_TRUE(k.key.empty());
  }
  l.on_missing_key = config::OnMissingKey::shared;
  auto k = build_key("rl", route("api"), l, facts(&none), h);
  EXPECT_TRUE(k.missing);
  EXPECT_EQ(k.key, "rl:api:per-key:{shared}");
  // No header source at all, an empty header, an absent claim, an empty query value: missing.
  EXPECT_TRUE(build_key("rl", route("api"), l, facts(nullptr), h).missing);
  Headers empty{{"x-api-key", ""}};
  EXPECT_TRUE(build_key("rl", route("api"), l, facts(&empty), h).missing);
  EXPECT_TRUE(
      build_key("rl", route("api"), limit("t", {part(Kind::jwt, "tenant")}), facts(), h).missing);
  Claims no_tenant{{"sub", "x"}};
  EXPECT_TRUE(build_key("rl", route("api"), limit("t", {part(Kind::jwt, "tenant")}),
                        facts(nullptr, &no_tenant), h)
                  .missing);
  auto f = facts();
  f.query = "user=";
  EXPECT_TRUE(build_key("rl", route("api"), limit("q", {part(Kind::query, "user")}), f, h).missing);
  // Present: not missing, and not the shared key.
  Headers present{{"X-API-KEY", "k1"}};
  auto ok = build_key("rl", route("api"), l, facts(&present), h);
  EXPECT_FALSE(ok.missing);
  EXPECT_TRUE(std::regex_match(ok.key, std::regex(R"(rl:api:per-key:\{[0-9a-f]{32}\})"))) << ok.key;
}

// ---------------------------------------------------------------- part values

TEST(PartValue, EachKind) {
  Headers h{{"X-Tenant", "Acme"}};
  Claims c{{"sub", "user-1"}};
  auto f = facts(&h, &c);
  f.host = "API.Example";
  EXPECT_EQ(part_value(part(Kind::ip), f), "203.0.113.7");
  EXPECT_EQ(part_value(part(Kind::route), f), "api");
  EXPECT_EQ(part_value(part(Kind::method), f), "GET");
  EXPECT_EQ(part_value(part(Kind::host), f), "api.example");
  EXPECT_EQ(part_value(part(Kind::path), f), "/v1/items");
  EXPECT_EQ(part_value(part(Kind::header, "x-tenant"), f), "Acme") << "the value keeps its case";
  EXPECT_EQ(part_value(part(Kind::query, "page"), f), "2");
  EXPECT_EQ(part_value(part(Kind::jwt, "sub"), f), "user-1");
  EXPECT_EQ(part_value(part(Kind::header, "x-other"), f), std::nullopt);
  EXPECT_EQ(part_value(part(Kind::query, "other"), f), std::nullopt);
  EXPECT_EQ(part_value(part(Kind::jwt, "other"), f), std::nullopt);
}

TEST(PartValue, AnIpv6ClientIsKeyedByItsPrefix) {
  auto f = facts();
  f.client = *config::parse_ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd");
  EXPECT_EQ(part_value(part(Kind::ip), f), "2001:db8:1:2:aaaa:bbbb:cccc:dddd") << "128: whole";
  f.ipv6_prefix = 64;
  EXPECT_EQ(part_value(part(Kind::ip), f), "2001:db8:1:2::");
  auto neighbour = f;
  neighbour.client = *config::parse_ip("2001:db8:1:2::1");
  const auto l = limit("per-ip", {part(Kind::ip)});
  EXPECT_EQ(key_of(l, f), key_of(l, neighbour)) << "one /64, one caller";
  f.ipv6_prefix = 56;
  EXPECT_EQ(part_value(part(Kind::ip), f), "2001:db8:1::");
  EXPECT_EQ(part_value(part(Kind::ip), facts()), "203.0.113.7") << "IPv4 is never folded";
}

TEST(PartValue, CookiesByNameFromTheCookieHeader) {
  using floodgate::keys::cookie_value;
  EXPECT_EQ(cookie_value("a=1; session=xyz; b=2", "session"), "xyz");
  EXPECT_EQ(cookie_value("session=xyz", "session"), "xyz");
  EXPECT_EQ(cookie_value("a=1;session=xyz ;b=2", "session"), "xyz");
  EXPECT_EQ(cookie_value("session=\"quoted\"", "session"), "quoted");
  EXPECT_EQ(cookie_value("session=first; session=second", "session"), "first");
  EXPECT_EQ(cookie_value("Session=xyz", "session"), std::nullopt) << "names are case-sensitive";
  EXPECT_EQ(cookie_value("my_session=xyz; sessionx=1", "session"), std::nullopt);
  EXPECT_EQ(cookie_value("session", "session"), std::nullopt);
  EXPECT_EQ(cookie_value("", "session"), std::nullopt);
  EXPECT_EQ(cookie_value("session=", "session"), "");
  Headers h{{"Cookie", "theme=dark; sid=abc"}};
  auto f = facts(&h);
  EXPECT_EQ(part_value(part(Kind::cookie, "sid"), f), "abc");
  EXPECT_EQ(part_value(part(Kind::cookie, "theme"), f), "dark");
  EXPECT_EQ(part_value(part(Kind::cookie, "other"), f), std::nullopt);
  Headers empty{{"Cookie", "sid="}};
  auto g = facts(&empty);
  EXPECT_EQ(part_value(part(Kind::cookie, "sid"), g), std::nullopt) << "empty: missing";
}

TEST(PartValue, TlsFingerprintsOnlyWhereTheConnectionHasThem) {
  auto f = facts();
  EXPECT_EQ(part_value(part(Kind::tls, "ja4"), f), std::nullopt);
  floodgate::tls::Fingerprints tls{"t13d1516h2_8daaf6152771_e5627efa2ab1",
                                   "0123456789abcdef0123456789abcdef"};
  f.tls = &tls;
  EXPECT_EQ(part_value(part(Kind::tls, "ja4"), f), tls.ja4);
  EXPECT_EQ(part_value(part(Kind::tls, "ja3"), f), tls.ja3);
}

TEST(PathTemplate, MatchesWholeSegmentsOnly) {
  config::PathTemplate t{"/users/{id}/orders", {"users", "", "orders"}};
  EXPECT_TRUE(t.matches("/users/1/orders"));
  EXPECT_TRUE(t.matches("/users/abc-def/orders"));
  EXPECT_FALSE(t.matches("/users//orders")) << "a parameter is never empty";
  EXPECT_TRUE(t.matches("/users/1/orders/")) << "a trailing slash: path_template_test.cpp";
  EXPECT_FALSE(t.matches("/users/1/orders/2"));
  EXPECT_FALSE(t.matches("/users/1/2/orders"));
  EXPECT_FALSE(t.matches("/users/1"));
  EXPECT_TRUE(t.matches("/Users/1/orders")) << "any case of a literal segment";
  EXPECT_FALSE(t.matches("users/1/orders"));
  auto r = route("api");
  r.path_templates = {t, config::PathTemplate{"/users/{id}", {"users", ""}}};
  EXPECT_EQ(floodgate::keys::matching_template(r, "/users/7"), "/users/{id}");
  EXPECT_EQ(floodgate::keys::matching_template(r, "/users/7/orders"), "/users/{id}/orders");
  EXPECT_EQ(floodgate::keys::matching_template(r, "/other"), "");
  auto f = facts();
  f.path = "/users/7/orders";
  f.path_template = "/users/{id}/orders";
  EXPECT_EQ(part_value(part(Kind::path), f), "/users/{id}/orders");
}

TEST(QueryParam, EdgeCases) {
  struct Case {
    const char* query;
    const char* name;
    std::optional<std::string> value;
  };
  const std::vector<Case> cases = {
      {"a=1&b=2", "a", "1"},
      {"a=1&b=2", "b", "2"},
      {"a=1&a=2", "a", "1"},  // the first occurrence
      {"a", "a", ""},         // present without a value
      {"a=", "a", ""},
      {"a=&a=2", "a", ""},
      {"a=1", "b", std::nullopt},
      {"", "a", std::nullopt},
      {"ab=1", "a", std::nullopt},  // a prefix of a name is not the name
      {"a=1", "ab", std::nullopt},
      {"xa=1&a=2", "a", "2"},
      {"&&a=1", "a", "1"},  // empty pairs are skipped
      {"a=1&", "a", "1"},
      {"b=1&", "a", std::nullopt},
      {"a=b=c", "a", "b=c"},             // only the first '=' separates
      {"a=x%20y", "a", "x%20y"},         // raw: not decoded
      {"a%20b=1", "a b", std::nullopt},  // names are not decoded either
      {"A=1", "a", std::nullopt},        // case-sensitive
      {"a=1;b=2", "a", "1;b=2"},         // ';' is not a separator
  };
  for (const auto& c : cases) {
    auto v = query_param(c.query, c.name);
    EXPECT_EQ(v ? std::optional<std::string>(std::string(*v)) : std::nullopt, c.value)
        << "query \"" << c.query << "\" name \"" << c.name << "\"";
  }
}

}  // namespace
