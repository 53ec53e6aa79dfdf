// log.replay_fields and log.replay_hashed: what the access log records for `floodgate
// replay`. (Configs these make invalid are fixtures: replay_*.yaml.)

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgate/config/loader.hpp"

namespace {

using namespace floodgate::config;

const std::string kRoutes = R"(upstreams:
  origin: { url: "http://127.0.0.1:9000" }
store: { key_secret: replay-config-secret }
jwt:
  algorithms: [HS256]
  hs256_secret: replay-config-jwt-secret
routes:
  - name: api
    match: { path_prefix: /api/ }
    upstream: origin
    limits:
      - { name: per-key, algorithm: fixed_window, limit: 10, window: 1m, key: ["header:X-Api-Key", ip] }
      - name: tenant
        algorithm: sliding_window
        limit: 100
        window: 1m
        key: [jwt:tenant]
        overrides: { by: jwt:plan, values: { gold: { limit: 1000 } } }
      - name: tokens
        algorithm: token_bucket
        capacity: 1000
        refill_rate: 10/s
        key: [route, "query:project"]
        cost: { from: "header:X-Cost", default: 1, max: 100 }
  - name: web
    match: { path_prefix: / }
    upstream: origin
    limits:
      - { name: per-ip, algorithm: sliding_window, limit: 5, window: 10s, key: [ip, "header:x-API-key", method, path, host] }
)";

LoadResult load(const std::string& log_section) {
  return load_config_text("server:\n  listen: 127.0.0.1:8080\nlog:\n" + log_section + kRoutes,
                          "replay.yaml", [](const std::string&) { return std::nullopt; });
}

std::string errors_of(const LoadResult& r) {
  std::string out;
  for (const auto& d : r.errors) out += "\n  " + d.to_string();
  return out;
}

struct Field {
  std::string text;
  bool hashed;
  bool operator==(const Field&) const = default;
};
std::ostream& operator<<(std::ostream& out, const Field& f) {
  return out << f.text << (f.hashed ? " (hashed)" : "");
}

std::vector<Field> fields_of(const LoadResult& r) {
  std::vector<Field> out;
  if (r.config)
    for (const auto& f : r.config->log.replay_fields) out.push_back({f.text(), f.hashed});
  return out;
}

TEST(ReplayFields, NoneUnlessAsked) {
  auto r = load("  access_log: true\n");
  ASSERT_TRUE(r.config) << errors_of(r);
  EXPECT_TRUE(r.config->log.replay_fields.empty());
}

TEST(ReplayFields, AutoIsIpHostAndEveryInputTheLimitsName) {
  auto r = load("  access_log: true\n  replay_fields: auto\n");
  ASSERT_TRUE(r.config) << errors_of(r);
  EXPECT_TRUE(r.warnings.empty());
  // Keys, tiers (overrides.by) and cost headers; once each (header names fold case); not
  // route, method or path, which every line has.
  const std::vector<Field> expected = {
      {"ip", false},           {"host", false},     {"header:x-api-key", false},
      {"jwt:tenant", false},   {"jwt:plan", false}, {"query:project", false},
      {"header:x-cost", false}};
  EXPECT_EQ(fields_of(r), expected);
  const auto& f = r.config->log.replay_fields;
  ASSERT_EQ(f.size(), expected.size());
  EXPECT_EQ(f[2].kind, ReplayField::Kind::header);
  EXPECT_EQ(f[2].name, "x-api-key");
  EXPECT_EQ(f[4].kind, ReplayField::Kind::jwt);
  EXPECT_EQ(f[4].name, "plan");
  EXPECT_EQ(f[5].kind, ReplayField::Kind::query);
  EXPECT_EQ(f[5].name, "project");
}

TEST(ReplayFields, AutoWithoutLimitsIsIpAndHost) {
  auto r = load_config_text(
      "server:\n  listen: 127.0.0.1:8080\nlog: { access_log: true, replay_fields: auto }\n"
      "upstreams:\n  origin: { url: \"http://127.0.0.1:9000\" }\n"
      "routes:\n  - { name: r, match: { path_prefix: / }, upstream: origin }\n",
      "replay.yaml", [](const std::string&) { return std::nullopt; });
  ASSERT_TRUE(r.config) << errors_of(r);
  EXPECT_EQ(fields_of(r), (std::vector<Field>{{"ip", false}, {"host", false}}));
}

TEST(ReplayFields, AListIsTakenAsWrittenOnceEach) {
  auto r = load(
      "  access_log: true\n"
      "  replay_fields: [ip, host, \"header:X-Api-Key\", \"query:k\", \"jwt:tenant\", "
      "\"header:x-api-KEY\", ip]\n");
  ASSERT_TRUE(r.config) << errors_of(r);
  EXPECT_EQ(fields_of(r), (std::vector<Field>{{"ip", false},
                                              {"host", false},
                                              {"header:x-api-key", false},
                                              {"query:k", false},
                                              {"jwt:tenant", false}}));
}

TEST(ReplayFields, HashedMarksRecordedFields) {
  auto r = load(
      "  access_log: true\n  replay_fields: [ip, host, \"header:X-Api-Key\", \"jwt:tenant\"]\n"
      "  replay_hashed: [ip, \"header:X-API-KEY\", \"jwt:tenant\"]\n");
  ASSERT_TRUE(r.config) << errors_of(r);
  EXPECT_EQ(fields_of(r),
            (std::vector<Field>{
                {"ip", true}, {"host", false}, {"header:x-api-key", true}, {"jwt:tenant", true}}));
  auto a =
      load("  access_log: true\n  replay_fields: auto\n  replay_hashed: [ip, \"query:project\"]\n");
  ASSERT_TRUE(a.config) << errors_of(a);
  for (const auto& f : fields_of(a))
    EXPECT_EQ(f.hashed, f.text == "ip" || f.text == "query:project") << f;
}

TEST(ReplayFields, MethodIsAlreadyInEveryLine) {
  auto r = load("  access_log: true\n  replay_fields: [ip, method]\n");
  EXPECT_FALSE(r.config);
  ASSERT_EQ(r.errors.size(), 1u) << errors_of(r);
  EXPECT_NE(r.errors[0].message.find("log.replay_fields: \"method\" is in every access log line"),
            std::string::npos)
      << errors_of(r);
}

TEST(ReplayFields, HashingAFieldNotRecordedIsAnError) {
  auto r = load("  access_log: true\n  replay_fields: [ip]\n  replay_hashed: [\"jwt:tenant\"]\n");
  EXPECT_FALSE(r.config);
  ASSERT_EQ(r.errors.size(), 1u) << errors_of(r);
  EXPECT_NE(r.errors[0].message.find("\"jwt:tenant\" is not one of log.replay_fields"),
            std::string::npos)
      << errors_of(r);
}

TEST(ReplayFields, WithoutTheAccessLogIsAWarning) {
  for (const char* section :
       {"  replay_fields: auto\n", "  access_log: false\n  replay_fields: [ip]\n"}) {
    auto r = load(section);
    ASSERT_TRUE(r.config) << section << errors_of(r);
    ASSERT_EQ(r.warnings.size(), 1u) << section;
    EXPECT_NE(r.warnings[0].message.find("log.replay_fields"), std::string::npos)
        << r.warnings[0].to_string();
    EXPECT_NE(r.warnings[0].message.find("log.access_log: true"), std::string::npos)
        << r.warnings[0].to_string();
    EXPECT_EQ(r.warnings[0].line, section[2] == 'r' ? 4 : 5) << r.warnings[0].to_string();
  }
}

}  // namespace
