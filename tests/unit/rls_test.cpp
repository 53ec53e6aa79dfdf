// Envoy's rate limit service: the `rls:` section as --check-config reads it (listeners,
// floodgate's own domains, what an RLS limit may not say) and gRPC's unary framing.

#include <gtest/gtest.h>

#include <string>

#include "exchange/grpc.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/decide/descriptor_plan.hpp"
#include "rls/grpc_unary.hpp"

namespace floodgate {
namespace {

config::LoadResult load_rls(const std::string& rls) {
  return config::load_config_text(
      "server: { threads: 1 }\nrls:\n  listen: [\"127.0.0.1:8081\"]\n" + rls, "rls.yaml",
      config::process_env());
}

std::string errors_of(const config::LoadResult& r) {
  std::string out;
  for (const auto& e : r.errors) out += e.to_string() + "\n";
  return out;
}

TEST(RlsConfig, DomainsBecomeRoutesThatNoRequestMatches) {
  auto r = load_rls(R"(  domains:
    - domain: edge
      descriptors:
        - match: [ { key: remote_address } ]
          limits: [ { name: per-ip, algorithm: sliding_window, limit: 100, window: 60s } ]
        - match: [ { key: tenant, value: acme }, { key: path } ]
          limits: [ { name: acme, algorithm: token_bucket, capacity: 20, refill_rate: 10/s, lease: { size: 5 } } ]
)");
  ASSERT_TRUE(r.config) << errors_of(r);
  const auto& c = *r.config;
  ASSERT_EQ(c.rls.listen.size(), 1u);
  EXPECT_TRUE(c.rls.listen[0].speaks(config::Protocol::h2c));
  EXPECT_FALSE(c.rls.listen[0].speaks(config::Protocol::http1));
  ASSERT_EQ(c.routes.size(), 1u);
  EXPECT_EQ(c.routes[0].name, "rls:edge");
  EXPECT_TRUE(c.routes[0].rls);
  // per-ip, acme, and the override limit a descriptor's own `limit` is counted under.
  ASSERT_EQ(c.routes[0].limits.size(), 3u);
  EXPECT_EQ(c.routes[0].limits[2].name, "override");
  ASSERT_EQ(c.routes[0].limits[1].key.size(), 2u);
  EXPECT_EQ(c.routes[0].limits[1].key[1].kind, config::KeyPart::Kind::descriptor);
  const auto* d = c.rls.domain("edge");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->rules.size(), 2u);
}

TEST(RlsConfig, WhatAnRlsLimitCannotSayIsAnErrorAtItsPlace) {
  auto r = load_rls(R"(  domains:
    - domain: edge
      descriptors:
        - match: [ { key: a } ]
          limits:
            - { name: c, algorithm: concurrency, limit: 5 }
            - { name: k, algorithm: fixed_window, limit: 5, window: 1s, key: [ip] }
            - { name: override, algorithm: fixed_window, limit: 5, window: 1s }
        - match: [ { key: a } ]
          limits: [ { name: again, algorithm: fixed_window, limit: 5, window: 1s } ]
        - match: [ { key: "" } ]
          limits: [ { name: empty, algorithm: fixed_window, limit: 5, window: 1s } ]
    - domain: "bad domain"
)");
  EXPECT_FALSE(r.config);
  const auto e = errors_of(r);
  EXPECT_NE(e.find("rls.yaml:9:"), std::string::npos) << e;  // concurrency
  EXPECT_NE(e.find("Envoy never tells"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key \"key\""), std::string::npos) << e;
  EXPECT_NE(e.find("\"override\" is reserved"), std::string::npos) << e;
  EXPECT_NE(e.find("the same descriptor [a]"), std::string::npos) << e;
  EXPECT_NE(e.find("must not be empty"), std::string::npos) << e;
  EXPECT_NE(e.find("a domain must be"), std::string::npos) << e;
}

TEST(RlsConfig, AListenerSpeaksHttp2Only) {
  auto r = config::load_config_text(
      "server: { threads: 1 }\nrls:\n  listen: [ { address: \"127.0.0.1:1\", protocols: [http1] } "
      "]\n",
      "rls.yaml", config::process_env());
  EXPECT_FALSE(r.config);
  EXPECT_NE(errors_of(r).find("unknown key \"protocols\""), std::string::npos) << errors_of(r);
}

TEST(GrpcUnary, OneMessageIsTakenFromItsFrame) {
  std::string body;
  rls::frame(body, "hello");
  std::string_view m;
  EXPECT_EQ(rls::unframe(body, 100, m), rls::Unframed::ok);
  EXPECT_EQ(m, "hello");
  EXPECT_EQ(rls::unframe(body.substr(0, 7), 100, m), rls::Unframed::truncated);
  EXPECT_EQ(rls::unframe(body + "x", 100, m), rls::Unframed::extra);
  EXPECT_EQ(rls::unframe(body, 4, m), rls::Unframed::too_large);
  EXPECT_EQ(rls::unframe("", 100, m), rls::Unframed::none);
  body[0] = 1;
  EXPECT_EQ(rls::unframe(body, 100, m), rls::Unframed::compressed);
  EXPECT_EQ(rls::code_of(rls::Unframed::compressed), rls::GrpcCode::unimplemented);
  EXPECT_EQ(rls::code_of(rls::Unframed::truncated), rls::GrpcCode::invalid_argument);
}

TEST(GrpcUnary, TimeoutsAreReadInEveryUnitAndZeroMeansNone) {
  using std::chrono::microseconds;
  EXPECT_EQ(rls::parse_timeout("20m"), microseconds(20'000));
  EXPECT_EQ(rls::parse_timeout("1S"), microseconds(1'000'000));
  EXPECT_EQ(rls::parse_timeout("2M"), microseconds(120'000'000));
  EXPECT_EQ(rls::parse_timeout("1H"), microseconds(3'600'000'000LL));
  EXPECT_EQ(rls::parse_timeout("5u"), microseconds(5));
  EXPECT_EQ(rls::parse_timeout("5000n"), microseconds(5));
  EXPECT_FALSE(rls::parse_timeout("0m"));
  EXPECT_FALSE(rls::parse_timeout("123456789m"));  // more than 8 digits
  EXPECT_FALSE(rls::parse_timeout("20x"));
  EXPECT_FALSE(rls::parse_timeout("m"));
  EXPECT_FALSE(rls::parse_timeout(""));
}

TEST(GrpcUnary, MessagesArePercentEncoded) {
  EXPECT_EQ(http::percent_encoded("50% off\n\xc3\xa9"), "50%25 off%0A%C3%A9");
}

// The access log's text of a descriptor reads back as the same entries, whatever bytes they
// hold; a text that is not one changes nothing.
TEST(DescriptorText, EntriesReadBackAsTheyWereSent) {
  using Entry = decide::DescriptorCall::Entry;
  const std::string odd("a&b=c %\"\\\x01\xff", 12);
  const std::vector<Entry> entries = {{"remote_address", "10.0.0.1"}, {"path", odd}, {"e", ""}};
  std::string text;
  decide::append_entries_text(text, entries);
  EXPECT_EQ(text.find_first_of(" \"\\"), std::string::npos) << text;  // no JSON escaping needed
  decide::DescriptorCall call;
  std::string storage;
  storage.reserve(text.size());
  ASSERT_TRUE(decide::read_entries_text(text, storage, call)) << text;
  ASSERT_EQ(call.descriptors.size(), 1u);
  const auto read = call.entries_of(call.descriptors[0]);
  ASSERT_EQ(read.size(), entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(read[i].key, entries[i].key);
    EXPECT_EQ(read[i].value, entries[i].value);
  }
  for (const char* bad : {"", "=v", "k", "k=v&", "k=%4", "k=%zz", "k=a=b", "k=v&=w"}) {
    decide::DescriptorCall c;
    std::string s;
    s.reserve(16);
    EXPECT_FALSE(decide::read_entries_text(bad, s, c)) << bad;
    EXPECT_TRUE(c.entries.empty() && c.descriptors.empty()) << bad;
  }
}

// A domain is protobuf `bytes`: logged percent-encoded, it is valid UTF-8 JSON whatever was
// sent, and reads back as sent.
TEST(DescriptorText, ADomainOfAnyBytesIsLoggedAsText) {
  const std::string odd = "ed\xff\xfe ge\"\\&=%";
  std::string text;
  decide::append_logged_text(text, odd);
  for (char c : text) EXPECT_TRUE(c > 0x20 && c < 0x7f && c != '"' && c != '\\') << text;
  std::string storage;
  storage.reserve(text.size());
  auto back = decide::read_logged_text(text, storage);
  ASSERT_TRUE(back) << text;
  EXPECT_EQ(*back, odd);
  for (const char* bad : {"%", "%f", "%gg", "a&b", "a=b"}) {
    std::string s;
    EXPECT_FALSE(decide::read_logged_text(bad, s)) << bad;
    EXPECT_TRUE(s.empty()) << bad;
  }
}

TEST(DescriptorText, OverrideUnitsAreTheApisSixAndNothingElse) {
  EXPECT_EQ(decide::override_unit_seconds(1), 1);
  EXPECT_EQ(decide::override_unit_seconds(2), 60);
  EXPECT_EQ(decide::override_unit_seconds(3), 3600);
  EXPECT_EQ(decide::override_unit_seconds(4), 86400);
  EXPECT_EQ(decide::override_unit_seconds(5), 30 * 86400);
  EXPECT_EQ(decide::override_unit_seconds(6), 365 * 86400);
  for (int unit : {0, 7, 37, -1}) EXPECT_EQ(decide::override_unit_seconds(unit), 0) << unit;
}

}  // namespace
}  // namespace floodgate
