// `floodgate replay`, the real binary: known answers for the algorithms, its inputs (plain,
// gzip, stdin, several instances, nginx combined, bad lines), its exit status, and its
// reports (JSON, --decisions, --baseline, --html).
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <map>
#include <set>

#include "floodgate/limit/utc_time.hpp"
#include "replay_support.hpp"

namespace floodgate::testing {
namespace {

namespace rs = replay_support;
using rs::at;

constexpr const char* kServer =
    "server:\n  listen: [127.0.0.1:0]\n"
    "upstreams:\n  origin: { url: \"http://127.0.0.1:9\" }\n"
    "store: { key_secret: replay-test-secret }\n";

std::string route(const std::string& name, const std::string& prefix, const std::string& limit) {
  return "  - name: " + name + "\n    match: { path_prefix: " + prefix +
         " }\n    upstream: origin\n    limits:\n      - " + limit + "\n";
}

// The replay's verdict on each line of `log` under `config` (its --decisions file).
std::vector<std::string> verdicts_of(const rs::ScratchDir& dir, const std::string& config,
                                     const std::string& log) {
  auto r = rs::replay(
      {"--config", config, "--json", "--decisions", dir / "d.tsv", dir.write("a.log", log)}, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> out;
  for (const auto& d : rs::read_decisions(dir / "d.tsv")) out.push_back(d.verdict());
  return out;
}

// ------------------------------------------------------------------------- known answers

// Every limit allows 10 per minute (or a burst of 5 refilling 1/s) per client address.
const std::string kKnownConfig =
    std::string(kServer) + "routes:\n" +
    route("fixed", "/fixed/",
          "{ name: fixed-minute, algorithm: fixed_window, limit: 10, window: 1m, key: [ip] }") +
    route("sliding", "/sliding/",
          "{ name: sliding-minute, algorithm: sliding_window, limit: 10, window: 1m, key: [ip] }") +
    route("bucket", "/bucket/",
          "{ name: burst, algorithm: token_bucket, capacity: 5, refill_rate: 1/s, key: [ip] }");

struct Request {
  long long micros;  // after 05:00:00
  std::string path;
  std::string ip;
};

struct KnownLog {
  std::vector<Request> requests;               // in time order
  std::map<std::string, std::string> refused;  // path -> the limit that must refuse it
};

// Each scenario is played against the fixed and the sliding window (their own keys: the
// key includes the route), by its own client.
KnownLog known_log() {
  KnownLog k;
  auto both = [&](const std::string& ip, const std::string& scenario, long long micros, int i) {
    for (const char* r : {"fixed", "sliding"})
      k.requests.push_back(
          {micros, "/" + std::string(r) + "/" + scenario + "/" + std::to_string(i), ip});
  };
  // At the limit: 10 requests in one window, none refused.
  for (int i = 0; i < 10; ++i) both("10.0.0.1", "exact", at(10, 5 + i), i);
  // Just above: 11, the 11th refused (the previous window is empty for the sliding one).
  for (int i = 0; i < 11; ++i) both("10.0.0.2", "above", at(10, 5 + i, 500'000), i);
  k.refused["/fixed/above/10"] = "fixed-minute";
  k.refused["/sliding/above/10"] = "sliding-minute";
  // A burst across the minute boundary: 10 at 05:10:59.5 and 10 at 05:11:00.5.
  for (int i = 0; i < 10; ++i)
    both("10.0.0.3", "boundary/first", at(10, 59, 500'000 + i * 10'000), i);
  for (int i = 0; i < 10; ++i)
    both("10.0.0.3", "boundary/second", at(11, 0, 500'000 + i * 10'000), i);
  // fixed_window: a new window, a new count: all 20 admitted.
  // sliding_window (algorithm.cpp, sliding_window()): the estimate is
  //   previous * (1 - elapsed / window) + current,
  // and a request is admitted when estimate + 1 <= 10. At 05:11:00.5 + i * 10 ms, elapsed is
  // 0.5 s + i * 10 ms, so the estimate is 10 * (1 - 0.59 / 60) = 9.90 or more: every one of
  // the second 10 is refused (and a refusal charges nothing, so current stays 0).
  for (int i = 0; i < 10; ++i)
    k.refused["/sliding/boundary/second/" + std::to_string(i)] = "sliding-minute";
  // The same burst, the second half 12 s into the next minute: the previous 10 weigh
  // 10 * (1 - 12 / 60) = 8, so 8 + 1 = 9 and then 7.998 + 1 + 1 = 9.998 fit, and from the
  // third on (7.997 + 2 + 1 = 10.997) none does: 2 admitted, 8 refused.
  for (int i = 0; i < 10; ++i)
    both("10.0.0.4", "partial/first", at(10, 59, 500'000 + i * 10'000), i);
  for (int i = 0; i < 10; ++i) both("10.0.0.4", "partial/second", at(11, 12, i * 10'000), i);
  for (int i = 2; i < 10; ++i)
    k.refused["/sliding/partial/second/" + std::to_string(i)] = "sliding-minute";
  // Token bucket, capacity 5, 1 token/s, starting full: 8 requests 1 ms apart take the 5
  // tokens and leave 0.004 + 0.001 per ms: the last 3 are refused.
  for (int i = 0; i < 8; ++i)
    k.requests.push_back({at(10, 20, i * 1000), "/bucket/first/" + std::to_string(i), "10.0.0.5"});
  for (int i = 5; i < 8; ++i) k.refused["/bucket/first/" + std::to_string(i)] = "burst";
  // 2.496 s later the bucket holds 2.5 tokens: 2 admitted, the third (0.502) refused.
  for (int i = 0; i < 3; ++i)
    k.requests.push_back(
        {at(10, 22, 500'000 + i * 1000), "/bucket/second/" + std::to_string(i), "10.0.0.5"});
  k.refused["/bucket/second/2"] = "burst";
  // Much later the bucket is full (5, not more): admitted.
  k.requests.push_back({at(10, 40), "/bucket/later/0", "10.0.0.5"});
  std::stable_sort(k.requests.begin(), k.requests.end(),
                   [](const Request& a, const Request& b) { return a.micros < b.micros; });
  return k;
}

std::string log_text(const std::vector<Request>& requests) {
  std::string out;
  for (const auto& r : requests)
    out += rs::access_line(r.micros, r.path, rs::ip_field(r.ip)) + "\n";
  return out;
}

TEST(ReplayKnownAnswer, RefusesExactlyWhatTheAlgorithmsDefine) {
  rs::ScratchDir dir;
  const auto known = known_log();
  const auto config = dir.write("known.yaml", kKnownConfig);
  const auto log = dir.write("access.log", log_text(known.requests));
  const auto decisions_file = dir / "decisions.tsv";
  auto r = rs::replay({"--config", config, "--json", "--decisions", decisions_file, log}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = rs::parse_report(r.out);

  EXPECT_EQ(rs::number(report.at("lines").at("requests")), 134);
  EXPECT_EQ(rs::number(report.at("lines").at("bad")), 0);
  const auto& fixed = rs::limit_entry(report, "fixed", "fixed-minute");
  const auto& sliding = rs::limit_entry(report, "sliding", "sliding-minute");
  const auto& bucket = rs::limit_entry(report, "bucket", "burst");
  EXPECT_EQ(rs::number(fixed.at("seen")), 61);
  EXPECT_EQ(rs::number(fixed.at("refused")), 1);  // only the 11th of "above"
  EXPECT_EQ(rs::number(sliding.at("seen")), 61);
  EXPECT_EQ(rs::number(sliding.at("refused")), 1 + 10 + 8);
  EXPECT_EQ(rs::number(bucket.at("seen")), 12);
  EXPECT_EQ(rs::number(bucket.at("refused")), 3 + 1);
  EXPECT_EQ(rs::number(report.at("candidate").at("refused")), 24);
  EXPECT_EQ(rs::number(report.at("candidate").at("requests")), 134);
  // Per minute (05:10, 05:11): the sliding window refuses "above"'s 11th in the first.
  EXPECT_EQ(boost::json::serialize(sliding.at("refused_per_minute")), "[1,18]");
  EXPECT_EQ(boost::json::serialize(fixed.at("refused_per_minute")), "[1,0]");

  // Which requests: line by line.
  auto decisions = rs::read_decisions(decisions_file);
  ASSERT_EQ(decisions.size(), known.requests.size());
  std::set<std::string> refused;
  for (std::size_t i = 0; i < decisions.size(); ++i) {
    const auto& d = decisions[i];
    const auto& req = known.requests[i];
    EXPECT_EQ(d.path, req.path);
    EXPECT_EQ(d.time, rs::ts(req.micros));
    EXPECT_EQ(d.method, "GET");
    EXPECT_EQ(d.route(), req.path.substr(1, req.path.find('/', 1) - 1)) << d.path;
    auto expected = known.refused.find(req.path);
    if (expected == known.refused.end()) {
      EXPECT_EQ(d.verdict(), "admitted") << d.path;
      EXPECT_EQ(d.limit(), "-") << d.path;
    } else {
      EXPECT_EQ(d.verdict(), "refused") << d.path;
      EXPECT_EQ(d.limit(), expected->second) << d.path;
    }
    if (d.verdict() == "refused") refused.insert(d.path);
  }
  EXPECT_EQ(refused.size(), known.refused.size());
}

// One logged request a second from 10:00:00, and the verdict it must get.
struct Line {
  std::string path, fields, verdict;
};

// Replays `lines` through `config`, checks each verdict, and returns the JSON report.
boost::json::object replay_lines(const rs::ScratchDir& dir, const std::string& config,
                                 const std::vector<Line>& lines,
                                 const std::vector<std::string>& options = {}) {
  std::string log;
  for (std::size_t i = 0; i < lines.size(); ++i)
    log += rs::access_line(at(10, static_cast<int>(i)), lines[i].path, lines[i].fields) + "\n";
  std::vector<std::string> args{"--config", config, "--json", "--decisions", dir / "d.tsv"};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back(dir.write("a.log", log));
  auto r = rs::replay(args, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto decisions = rs::read_decisions(dir / "d.tsv");
  EXPECT_EQ(decisions.size(), lines.size());
  for (std::size_t i = 0; i < std::min(lines.size(), decisions.size()); ++i) {
    EXPECT_EQ(decisions[i].path, lines[i].path);
    EXPECT_EQ(decisions[i].verdict(), lines[i].verdict) << lines[i].path;
  }
  return r.exit_code == 0 ? rs::parse_report(r.out) : boost::json::object{};
}

// Keys from the logged "fields": a header (hashed or not), a query parameter and a claim,
// with the tier chosen by another claim.
TEST(ReplayKnownAnswer, KeysFromLoggedHeadersQueryParametersAndClaims) {
  rs::ScratchDir dir;
  const auto config = dir.write(
      "c.yaml",
      std::string(kServer) + "jwt:\n  algorithms: [HS256]\n  hs256_secret: replay-jwt-secret\n" +
          "routes:\n" +
          route("tenants", "/t/",
                "{ name: per-tenant, algorithm: fixed_window, limit: 2, window: 1m, key: "
                "[\"jwt:tenant\"], overrides: { by: \"jwt:plan\", values: { gold: { limit: 4 } "
                "} } }") +
          route("keys", "/k/",
                "{ name: per-key, algorithm: fixed_window, limit: 1, window: 1m, key: "
                "[\"header:X-Api-Key\", \"query:project\"] }"));
  const std::vector<Line> lines = {
      // Tenant a is gold (4 a minute), b has no plan (2), the last has no token.
      {"/t/a1", R"("jwt:tenant":"a","jwt:plan":"gold")", "admitted"},
      {"/t/b1", R"("jwt:tenant":"b")", "admitted"},
      {"/t/a2", R"("jwt:tenant":"a","jwt:plan":"gold")", "admitted"},
      {"/t/b2", R"("jwt:tenant":"b")", "admitted"},
      {"/t/b3", R"("jwt:tenant":"b")", "refused"},
      {"/t/a3", R"("jwt:tenant":"a","jwt:plan":"gold")", "admitted"},
      {"/t/a4", R"("jwt:tenant":"a","jwt:plan":"gold")", "admitted"},
      {"/t/a5", R"("jwt:tenant":"a","jwt:plan":"gold")", "refused"},
      {"/t/anonymous", R"("ip":"10.0.0.1")", "rejected"},
      // Header (as logged: case of the name folded, or hashed) and query parameter together.
      {"/k/1", R"("header:x-api-key":"k1","query:project":"p1")", "admitted"},
      {"/k/2", R"("header:x-api-key":"k1","query:project":"p2")", "admitted"},
      {"/k/3", R"("header:X-API-KEY":"k1","query:project":"p1")", "refused"},
      {"/k/4", R"("header:x-api-key":"#00112233445566778899aabbccddeeff","query:project":"p1")",
       "admitted"},
      {"/k/5", R"("header:x-api-key":"#00112233445566778899aabbccddeeff","query:project":"p1")",
       "refused"},
      {"/k/6", R"("header:x-api-key":"#ffeeddccbbaa99887766554433221100","query:project":"p1")",
       "admitted"},
      {"/k/7", R"("query:project":"p1")", "rejected"},
  };
  auto report = replay_lines(dir, config, lines);
  EXPECT_EQ(rs::number(report.at("candidate").at("rejected")), 2);
  EXPECT_TRUE(report.at("candidate").at("missing_inputs").as_array().empty());
}

// The lists decide first, as in the proxy: a denied caller is "denied" (403), an allowed one
// admitted past a limit it would break, and the lists' inputs are what `auto` records.
TEST(ReplayKnownAnswer, ListsAreDecidedBeforeTheLimits) {
  rs::ScratchDir dir;
  dir.write("deny.txt", "203.0.113.0/24\n");
  const auto config = dir.write(
      "c.yaml",
      std::string(kServer) +
          "lists:\n  deny: { file: deny.txt }\n"
          "  allow: { values: { \"header:X-Partner\": [acme] } }\n"
          "routes:\n" +
          route("api", "/",
                "{ name: one, algorithm: fixed_window, limit: 1, window: 1m, key: [ip] }"));
  const std::vector<Line> lines = {
      {"/1", rs::ip_field("192.0.2.1"), "admitted"},
      {"/2", rs::ip_field("192.0.2.1"), "refused"},
      {"/3", rs::ip_field("203.0.113.5"), "denied"},
      {"/4", rs::ip_field("192.0.2.2") + R"(,"header:x-partner":"acme")", "admitted"},
      {"/5", rs::ip_field("192.0.2.2") + R"(,"header:x-partner":"acme")", "admitted"},
      {"/6", rs::ip_field("203.0.113.6") + R"(,"header:x-partner":"acme")", "denied"},
  };
  auto report = replay_lines(dir, config, lines);
  EXPECT_EQ(rs::number(report.at("candidate").at("denied")), 2);
  EXPECT_EQ(rs::number(report.at("candidate").at("allowed")), 2);
  EXPECT_TRUE(report.at("candidate").at("missing_inputs").as_array().empty());
}

// A counting limit (count: {status: [401]}) keeps its charge only for a logged 401; a line
// floodgate refused at the time (its own 429) counts as no status.
TEST(ReplayKnownAnswer, CountingLimitsChargeOnlyTheLoggedStatusesTheyCount) {
  rs::ScratchDir dir;
  const auto config = dir.write(
      "c.yaml", std::string(kServer) + "routes:\n" +
                    route("login", "/",
                          "{ name: failed, algorithm: fixed_window, limit: 2, window: 1m, key: "
                          "[ip], count: { status: [401] } }"));
  struct Logged {
    std::string ip;
    int status;
    std::string decision, verdict;
  };
  const std::vector<Logged> lines = {
      {"192.0.2.1", 200, "", "admitted"},      {"192.0.2.1", 200, "", "admitted"},
      {"192.0.2.1", 200, "", "admitted"},      {"192.0.2.1", 401, "", "admitted"},
      {"192.0.2.1", 401, "", "admitted"},      {"192.0.2.1", 200, "", "refused"},
      {"192.0.2.2", 0, "limited", "admitted"},  // the live 429: not charged
      {"192.0.2.2", 401, "", "admitted"},      {"192.0.2.2", 401, "", "admitted"},
      {"192.0.2.2", 200, "", "refused"},
  };
  std::string log;
  for (std::size_t i = 0; i < lines.size(); ++i)
    log += rs::access_line(at(10, static_cast<int>(i)), "/" + std::to_string(i),
                           rs::ip_field(lines[i].ip), "POST", lines[i].decision, lines[i].status) +
           "\n";
  const auto verdicts_seen = verdicts_of(dir, config, log);
  ASSERT_EQ(verdicts_seen.size(), lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(verdicts_seen[i], lines[i].verdict) << i;
}

// A daily quota in Tokyo: the replay's clock, set to each logged request's time, crosses
// local midnight (15:00 UTC) as the proxy's did, and the quota starts again there.
TEST(ReplayKnownAnswer, ADailyQuotaStartsAgainAtLocalMidnight) {
  rs::ScratchDir dir;
  const auto config = dir.write(
      "c.yaml", std::string(kServer) + "routes:\n" +
                    route("api", "/",
                          "{ name: daily, algorithm: quota, period: day, timezone: Asia/Tokyo, "
                          "limit: 2, key: [ip] }"));
  const std::pair<int, const char*> lines[] = {// minute of 2026-12-03 14:00 UTC, verdict
                                               {0, "admitted"}, {10, "admitted"}, {20, "refused"},
                                               {59, "refused"}, {61, "admitted"}, {62, "admitted"},
                                               {63, "refused"}};
  std::string log;
  for (const auto& [minute, verdict] : lines) {
    auto line = rs::access_line(0, "/x", rs::ip_field("192.0.2.9"));  // rs::ts: 2026-11-30 05:00
    const auto ts = line.find("2026-11-30T05:00:00.000000Z");
    line.replace(ts, 27, limit::format_utc(limit::micros_of(2026, 12, 3, 14, minute, 0)));
    log += line + "\n";
  }
  const auto verdicts_seen = verdicts_of(dir, config, log);
  ASSERT_EQ(verdicts_seen.size(), std::size(lines));
  for (std::size_t i = 0; i < std::size(lines); ++i)
    EXPECT_EQ(verdicts_seen[i], lines[i].second) << i;
}

// Cookies and TLS fingerprints are read from the logged fields, path templates found again
// from the logged path: the replay keys these callers as the proxy did.
TEST(ReplayKnownAnswer, CookieFingerprintAndPathTemplateKeys) {
  rs::ScratchDir dir;
  const auto config = dir.write(
      "c.yaml", std::string(kServer) + "routes:\n" +
                    "  - name: api\n    match: { path_prefix: / }\n    upstream: origin\n"
                    "    path_template: /users/{id}/orders\n    limits:\n"
                    "      - { name: one, algorithm: fixed_window, limit: 1, window: 1h, key: "
                    "[path, \"cookie:sid\", \"tls:ja4\"] }\n");
  struct Logged {
    const char* path;
    const char* sid;
    const char* ja4;
    const char* verdict;
  };
  const Logged lines[] = {{"/users/1/orders", "a", "t13d1516h2_x_y", "admitted"},
                          {"/users/2/orders", "a", "t13d1516h2_x_y", "refused"},
                          {"/users/2/orders", "b", "t13d1516h2_x_y", "admitted"},
                          {"/users/2/orders", "a", "t12d1209h1_x_y", "admitted"},
                          {"/users/3/profile", "a", "t13d1516h2_x_y", "admitted"}};
  std::string log;
  for (std::size_t i = 0; i < std::size(lines); ++i)
    log += rs::access_line(at(10, static_cast<int>(i)), lines[i].path,
                           rs::ip_field("192.0.2.1") + ",\"cookie:sid\":\"" + lines[i].sid +
                               "\",\"tls:ja4\":\"" + lines[i].ja4 + "\"") +
           "\n";
  const auto verdicts_seen = verdicts_of(dir, config, log);
  ASSERT_EQ(verdicts_seen.size(), std::size(lines));
  for (std::size_t i = 0; i < std::size(lines); ++i)
    EXPECT_EQ(verdicts_seen[i], lines[i].verdict) << i;
}

// on_exceed: delay: a replay admits what the proxy would have held (at most max_delay's
// worth of refill beyond the burst) and refuses the rest.
TEST(ReplayKnownAnswer, ADelayLimitAdmitsUpToItsAllowance) {
  rs::ScratchDir dir;
  const auto config = dir.write(
      "c.yaml", std::string(kServer) + "routes:\n" +
                    route("api", "/",
                          "{ name: paced, algorithm: token_bucket, capacity: 1, refill_rate: 1/s, "
                          "key: [ip], on_exceed: delay, max_delay: 2s }"));
  const char* verdicts[] = {"admitted", "admitted", "admitted", "refused", "refused"};
  std::string log;
  for (int i = 0; i < 5; ++i)  // five requests in the same 10 ms
    log += rs::access_line(at(10, 0, i * 2000), "/x", rs::ip_field("192.0.2.5")) + "\n";
  const auto verdicts_seen = verdicts_of(dir, config, log);
  ASSERT_EQ(verdicts_seen.size(), std::size(verdicts));
  for (std::size_t i = 0; i < std::size(verdicts); ++i)
    EXPECT_EQ(verdicts_seen[i], verdicts[i]) << i;
}

// `rollout: P%`: the report says what enforcing the limit for 1% ... 100% of its keys would
// refuse, and at 100% that is every would-be refusal, enforced or shadowed.
TEST(ReplayKnownAnswer, ARolloutReportsWhatEachShareWouldRefuse) {
  rs::ScratchDir dir;
  const auto config =
      dir.write("c.yaml", std::string(kServer) + "routes:\n" +
                              route("api", "/",
                                    "{ name: one, algorithm: fixed_window, limit: 1, window: 1h, "
                                    "key: [ip], rollout: 10% }"));
  std::string log;
  for (int i = 0; i < 300; ++i)
    for (int j = 0; j < 3; ++j)  // 3 requests each: 2 would be refused
      log += rs::access_line(
                 at(10, 0, i * 3000 + j), "/x",
                 rs::ip_field("10.8." + std::to_string(i / 200) + "." + std::to_string(i % 200))) +
             "\n";
  auto r = rs::replay({"--config", config, "--json", dir.write("a.log", log)}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = rs::parse_report(r.out);
  const auto& limit = report.at("candidate").at("limits").as_array().at(0).as_object();
  const auto& rollout = limit.at("rollout").as_object();
  EXPECT_EQ(rollout.at("enforced").as_string(), "10%");
  const auto& would = rollout.at("would_refuse").as_object();
  EXPECT_EQ(rs::number(would.at("100%")), 600);
  std::int64_t previous = 0;
  for (const char* p : {"1%", "5%", "10%", "25%", "50%", "100%"}) {
    EXPECT_GE(rs::number(would.at(p)), previous) << p;
    EXPECT_EQ(rs::number(would.at(p)) % 2, 0) << p;  // two per caller, whole callers
    previous = rs::number(would.at(p));
  }
  // What was enforced at 10% is what the report says 10% refuses; the rest was shadowed.
  EXPECT_EQ(rs::number(limit.at("refused")), rs::number(would.at("10%")));
  EXPECT_EQ(rs::number(limit.at("shadow_refused")), 600 - rs::number(would.at("10%")));
  EXPECT_NEAR(static_cast<double>(rs::number(would.at("10%"))), 60, 36);
}

// The admin API's overrides, as GET /overrides lists them, replayed: an exempt caller is
// admitted past its limit, one with a quota of its own gets that quota.
TEST(ReplayKnownAnswer, OverridesFromTheAdminApiApplyAllAlong) {
  rs::ScratchDir dir;
  const auto config = dir.write(
      "c.yaml",
      std::string(kServer) + "routes:\n" +
          route("api", "/",
                "{ name: one, algorithm: fixed_window, limit: 1, window: 1m, key: [ip] }"));
  const auto overrides = dir.write(
      "o.json",
      R"({"overrides":[{"limit":"one","key":"ip=192.0.2.1","exempt":true,"until_ms":1,"by":"oncall"},)"
      R"({"limit":"one","key":"ip=192.0.2.2","quota":2,"by":"oncall"}]})");
  const std::vector<Line> lines = {
      {"/1", rs::ip_field("192.0.2.1"), "admitted"}, {"/2", rs::ip_field("192.0.2.1"), "admitted"},
      {"/3", rs::ip_field("192.0.2.2"), "admitted"}, {"/4", rs::ip_field("192.0.2.2"), "admitted"},
      {"/5", rs::ip_field("192.0.2.2"), "refused"},  {"/6", rs::ip_field("192.0.2.3"), "admitted"},
      {"/7", rs::ip_field("192.0.2.3"), "refused"},
  };
  auto report = replay_lines(dir, config, lines, {"--overrides", overrides});
  EXPECT_EQ(rs::number(report.at("candidate").at("allowed")), 2);
  // A file that is not what GET /overrides answers is an error naming it.
  auto bad = rs::replay(
      {"--config", config, "--overrides", dir.write("b.json", "[]"),
       dir.write("a2.log", rs::access_line(at(10, 0), "/x", rs::ip_field("192.0.2.9")) + "\n")},
      dir);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("b.json: expected {\"overrides\": [...]}"), std::string::npos) << bad.err;
}

// ------------------------------------------------------------------------- inputs

void write_gzip(const std::string& path, const std::string& text) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
}

// The report without what depends on the run (its timing) or on the file names.
boost::json::object comparable(boost::json::object report) {
  for (const char* k : {"files", "wall_seconds", "cpu_seconds", "requests_per_second"})
    report.erase(k);
  return report;
}

TEST(ReplayInputs, GzipAndStdinGiveTheSameReportAsThePlainFile) {
  rs::ScratchDir dir;
  const auto text = log_text(known_log().requests);
  const auto config = dir.write("known.yaml", kKnownConfig);
  const auto plain = dir.write("access.log", text);
  const auto gz = dir / "access.log.gz";
  write_gzip(gz, text);
  ASSERT_NE(rs::read_text(gz), text);  // really compressed

  auto p = rs::replay({"--config", config, "--json", "--decisions", dir / "plain.tsv", plain}, dir);
  auto g = rs::replay({"--config", config, "--json", "--decisions", dir / "gz.tsv", gz}, dir);
  auto s =
      rs::replay({"--config", config, "--json", "--decisions", dir / "stdin.tsv", "-"}, dir, gz);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  ASSERT_EQ(g.exit_code, 0) << g.err;
  ASSERT_EQ(s.exit_code, 0) << s.err;
  auto plain_report = comparable(rs::parse_report(p.out));
  EXPECT_EQ(rs::number(plain_report.at("candidate").at("refused")), 24);
  EXPECT_EQ(plain_report, comparable(rs::parse_report(g.out))) << p.out << "\n" << g.out;
  EXPECT_EQ(plain_report, comparable(rs::parse_report(s.out))) << p.out << "\n" << s.out;
  EXPECT_EQ(rs::read_text(dir / "plain.tsv"), rs::read_text(dir / "gz.tsv"));
  EXPECT_EQ(rs::read_text(dir / "plain.tsv"), rs::read_text(dir / "stdin.tsv"));
}

// Two instances sharing a store write two logs: replayed together, their requests count
// against one limit in time order, whatever the order of the files.
TEST(ReplayInputs, TwoInstancesAreMergedByTime) {
  rs::ScratchDir dir;
  const auto config =
      dir.write("c.yaml", std::string(kServer) + "routes:\n" +
                              route("r", "/",
                                    "{ name: per-ip, algorithm: fixed_window, limit: "
                                    "10, window: 1m, key: [ip] }"));
  std::string a, b;
  for (int i = 0; i < 6; ++i) {
    a += rs::access_line(at(10, 2 * i), "/a/" + std::to_string(i), rs::ip_field("10.1.1.1")) + "\n";
    b += rs::access_line(at(10, 2 * i + 1), "/b/" + std::to_string(i), rs::ip_field("10.1.1.1")) +
         "\n";
  }
  const auto file_a = dir.write("a.log", a), file_b = dir.write("b.log", b);
  for (const auto& order : {std::vector<std::string>{file_a, file_b}, {file_b, file_a}}) {
    std::vector<std::string> args = {"--config", config, "--json", "--decisions", dir / "d.tsv"};
    args.insert(args.end(), order.begin(), order.end());
    auto r = rs::replay(args, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto report = rs::parse_report(r.out);
    EXPECT_EQ(rs::number(report.at("out_of_order")), 0);
    EXPECT_EQ(rs::number(report.at("candidate").at("refused")), 2);
    auto decisions = rs::read_decisions(dir / "d.tsv");
    ASSERT_EQ(decisions.size(), 12u);
    for (std::size_t i = 0; i < decisions.size(); ++i) {
      const auto& d = decisions[i];
      // a0 b0 a1 b1 ... : the 11th and 12th (a5 at :10, b5 at :11) are over the limit.
      EXPECT_EQ(d.path, (i % 2 ? "/b/" : "/a/") + std::to_string(i / 2));
      EXPECT_EQ(d.time, rs::ts(at(10, static_cast<int>(i))));
      EXPECT_EQ(d.verdict(), i >= 10 ? "refused" : "admitted") << d.path;
    }
  }
}

TEST(ReplayInputs, NginxCombinedLinesAreReadAndASecondIsSpreadEvenly) {
  rs::ScratchDir dir;
  const auto config = dir.write(
      "c.yaml", std::string(kServer) + "routes:\n" +
                    route("search", "/search",
                          "{ name: per-k, algorithm: fixed_window, limit: 2, window: 1m, key: "
                          "[\"query:k\"] }") +
                    route("pages", "/",
                          "{ name: per-agent, algorithm: fixed_window, limit: 1, window: 1m, key: "
                          "[\"header:Referer\", \"header:User-Agent\"] }"));
  auto line = [](const std::string& time, const std::string& request, const std::string& referer,
                 const std::string& agent) {
    return "203.0.113.7 - - [" + time + "] \"" + request + "\" 200 512 \"" + referer + "\" \"" +
           agent + "\"\n";
  };
  // 06:10:50 at +01:00 is 05:10:50Z; 00:10:52 at -05:00 is 05:10:52Z.
  const std::string t50 = "30/Nov/2026:06:10:50 +0100", t51 = "30/Nov/2026:06:10:51 +0100";
  std::string log;
  log += line(t50, "GET /search?k=abc&z=1 HTTP/1.1", "-", "curl/8.0");
  log += line(t50, "GET /search?k=abc HTTP/1.1", "-", "curl/8.0");
  log += line(t50, "GET /search?z=2&k=abc HTTP/1.1", "-", "curl/8.0");  // abc's third
  log += line(t50, "GET /search?k=def HTTP/1.1", "-", "curl/8.0");
  log += "203.0.113.9 - - [" + t50 + "] \"-\" 400 0 \"-\" \"-\"\n";  // no request: skipped
  log += line(t51, "GET /page/1 HTTP/1.1", "https://ref.example/", "Mozilla/5.0 (X11)");
  log += line(t51, "GET /page/2 HTTP/1.1", "https://ref.example/", "Mozilla/5.0 (X11)");
  log += line(t51, "GET /page/3 HTTP/1.1", "https://ref.example/", "-");  // no agent: rejected
  log += line("30/Nov/2026:00:10:52 -0500", "POST /page/4 HTTP/1.1", "https://ref.example/",
              "Other/1.0");
  const auto file = dir.write("nginx.log", log);
  auto r = rs::replay({"--config", config, "--json", "--decisions", dir / "d.tsv", file}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = rs::parse_report(r.out);
  EXPECT_EQ(rs::number(report.at("lines").at("nginx")), 9);
  EXPECT_EQ(rs::number(report.at("lines").at("requests")), 8);
  EXPECT_EQ(rs::number(report.at("lines").at("skipped")), 1);
  EXPECT_EQ(rs::number(report.at("lines").at("bad")), 0);
  EXPECT_EQ(rs::number(report.at("candidate").at("rejected")), 1);

  struct Expected {
    std::string time, method, path, verdict;
  };
  const std::vector<Expected> expected = {
      // One second's four requests at 0, 1/4, 2/4 and 3/4 of it, in their order.
      {"2026-11-30T05:10:50.000000Z", "GET", "/search", "admitted"},
      {"2026-11-30T05:10:50.250000Z", "GET", "/search", "admitted"},
      {"2026-11-30T05:10:50.500000Z", "GET", "/search", "refused"},
      {"2026-11-30T05:10:50.750000Z", "GET", "/search", "admitted"},
      // Three: at 0, 1/3 and 2/3 (in whole microseconds).
      {"2026-11-30T05:10:51.000000Z", "GET", "/page/1", "admitted"},
      {"2026-11-30T05:10:51.333333Z", "GET", "/page/2", "refused"},
      {"2026-11-30T05:10:51.666666Z", "GET", "/page/3", "rejected"},
      {"2026-11-30T05:10:52.000000Z", "POST", "/page/4", "admitted"},
  };
  auto decisions = rs::read_decisions(dir / "d.tsv");
  ASSERT_EQ(decisions.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(decisions[i].time, expected[i].time) << i;
    EXPECT_EQ(decisions[i].method, expected[i].method) << i;
    EXPECT_EQ(decisions[i].path, expected[i].path) << i;  // the query split off
    EXPECT_EQ(decisions[i].verdict(), expected[i].verdict) << i;
  }
}

// An nginx log has paths as clients sent them; the proxy limits their normalized form (issue
// 15), so a replay must too: variants of a refused path are refused, and a path the proxy
// answers 400 (an encoded '/', a broken escape) is rejected, not decided.
TEST(ReplayInputs, NginxPathVariantsAreDecidedAsTheProxyWould) {
  rs::ScratchDir dir;
  const auto config = dir.write(
      "c.yaml", std::string(kServer) + "routes:\n" +
                    route("checkout", "/api/checkout",
                          "{ name: l, algorithm: fixed_window, limit: 1, window: 1h, key: [route] "
                          "}"));
  std::string log;
  for (const char* path :
       {"/api/checkout", "//api/checkout", "/api/./checkout", "/x/../api/checkout",
        "/api//checkout", "/api/%63heckout", "/api%2Fcheckout", "/api/%zz"})
    log += std::string("203.0.113.7 - - [30/Nov/2026:05:10:50 +0000] \"GET ") + path +
           " HTTP/1.1\" 200 1 \"-\" \"-\"\n";
  const auto file = dir.write("nginx.log", log);
  auto r = rs::replay({"--config", config, "--json", file}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = rs::parse_report(r.out);
  EXPECT_EQ(rs::number(report.at("candidate").at("refused")), 5) << r.out;
  EXPECT_EQ(rs::number(report.at("candidate").at("rejected")), 2) << r.out;
}

// An nginx line carries the whole query string, so the limits' query parameters are not
// missing from such a log, and the report must not warn that they were.
TEST(ReplayInputs, NginxQueryParametersAreNotReportedMissing) {
  rs::ScratchDir dir;
  const auto config =
      dir.write("c.yaml", std::string(kServer) + "routes:\n" +
                              route("search", "/",
                                    "{ name: per-k, algorithm: fixed_window, limit: 1, "
                                    "window: 1m, key: [\"query:k\"] }"));
  const auto file = dir.write(
      "nginx.log",
      "203.0.113.7 - - [30/Nov/2026:05:10:50 +0000] \"GET /s?k=abc HTTP/1.1\" 200 1 \"-\" \"-\"\n"
      "203.0.113.7 - - [30/Nov/2026:05:10:51 +0000] \"GET /s?k=abc HTTP/1.1\" 200 1 \"-\" \"-\"\n");
  auto r = rs::replay({"--config", config, "--json", file}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = rs::parse_report(r.out);
  EXPECT_EQ(rs::number(report.at("candidate").at("refused")), 1);  // k was read
  EXPECT_TRUE(report.at("candidate").at("missing_inputs").as_array().empty()) << r.out;
}

TEST(ReplayInputs, BadLinesAreCountedWithReasonsAndAreNotFatal) {
  rs::ScratchDir dir;
  const auto config = dir.write("known.yaml", kKnownConfig);
  std::string log;
  log += rs::access_line(at(10, 0), "/fixed/1", rs::ip_field("10.0.0.1")) + "\n";
  log += "garbage\n";
  log += "some words but no time\n";
  log += "{\"type\":\"access\",\"ts\":\"2026-11-30T05:10:01.000000Z\",\"method\":\"GET\",\n";
  log += "{\"type\":\"access\",\"method\":\"GET\",\"path\":\"/fixed/2\"}\n";
  log += "{\"type\":\"access\",\"ts\":\"yesterday\",\"method\":\"GET\",\"path\":\"/fixed/3\"}\n";
  log +=
      "{\"type\":\"access\",\"ts\":\"2026-11-30T05:10:02Z\",\"method\":\"GET\",\"path\":"
      "\"/fixed/4\"} trailing\n";
  log += "{\"time\":\"2026-11-30T05:10:02.000Z\",\"level\":\"info\",\"msg\":\"reloaded\"}\n";
  log += "\n";
  log += rs::access_line(at(10, 3), "/fixed/5", rs::ip_field("10.0.0.1")) + "\n";
  const auto file = dir.write("mixed.log", log);

  auto r = rs::replay({"--config", config, "--json", file}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = rs::parse_report(r.out);
  const auto& lines = report.at("lines");
  EXPECT_EQ(rs::number(lines.at("read")), 10);
  EXPECT_EQ(rs::number(lines.at("requests")), 2);
  EXPECT_EQ(rs::number(lines.at("bad")), 6);
  EXPECT_EQ(rs::number(lines.at("skipped")), 2);  // the other log line, the empty one
  EXPECT_EQ(rs::number(report.at("candidate").at("requests")), 2);
  // One reason each, worded for a person: find them by their gist.
  std::map<std::string, std::int64_t> reasons;
  for (const auto& [why, n] : report.at("bad_reasons").as_object())
    reasons[std::string(why)] = rs::number(n);
  auto count = [&](const std::string& gist) {
    std::int64_t total = 0;
    for (const auto& [why, n] : reasons)
      if (why.find(gist) != std::string::npos) total += n;
    return total;
  };
  EXPECT_EQ(reasons.size(), 6u) << r.out;
  // Lines not starting with '{' are taken for nginx ones.
  EXPECT_EQ(count("combined"), 1) << r.out;
  EXPECT_EQ(count("[time]"), 1) << r.out;
  EXPECT_EQ(count("malformed JSON"), 1) << r.out;
  EXPECT_EQ(count("no ts"), 1) << r.out;
  EXPECT_EQ(count("unreadable ts"), 1) << r.out;
  EXPECT_EQ(count("after the JSON"), 1) << r.out;

  // The text report says where each kind was first seen.
  auto text = rs::replay({"--config", config, file}, dir);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("6 bad"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(first at " + file + ":2)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(first at " + file + ":5)"), std::string::npos) << text.out;
}

// A gzip file cut short (a log being copied, a full disk) is read up to the cut, reported,
// and the replay still finishes.
TEST(ReplayInputs, TruncatedGzipIsReportedAndNotFatal) {
  rs::ScratchDir dir;
  const auto config = dir.write("known.yaml", kKnownConfig);
  std::string text;
  for (int i = 0; i < 3000; ++i)
    text += rs::access_line(at(10, i / 100, i % 100 * 10'000), "/fixed/" + std::to_string(i),
                            rs::ip_field("10.2." + std::to_string(i % 250) + ".1")) +
            "\n";
  const auto whole = dir / "whole.gz";
  write_gzip(whole, text);
  const auto bytes = rs::read_text(whole);
  // Cut in the middle of the deflate stream, and cut only the trailer (CRC and length).
  const auto middle = dir.write("middle.gz", bytes.substr(0, bytes.size() / 2));
  const auto trailer = dir.write("trailer.gz", bytes.substr(0, bytes.size() - 4));

  for (const auto& file : {middle, trailer}) {
    SCOPED_TRACE(file);
    auto r = rs::replay({"--config", config, "--json", file}, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto report = rs::parse_report(r.out);
    const auto& errors = report.at("read_errors").as_array();
    ASSERT_EQ(errors.size(), 1u) << r.out;
    EXPECT_NE(std::string(errors[0].as_string()).find(file), std::string::npos) << r.out;
    EXPECT_GT(rs::number(report.at("lines").at("requests")), 0);
    EXPECT_LE(rs::number(report.at("lines").at("requests")), 3000);
  }
}

TEST(ReplayInputs, MissingLogOrBrokenConfigExitsWithStatus2) {
  rs::ScratchDir dir;
  const auto config = dir.write("known.yaml", kKnownConfig);
  const auto log = dir.write("a.log", rs::access_line(at(10, 0), "/x", rs::ip_field("10.0.0.1")));

  auto missing = rs::replay({"--config", config, log, dir / "missing.log"}, dir);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("cannot open " + (dir / "missing.log")), std::string::npos)
      << missing.err;
  EXPECT_EQ(missing.out, "");

  const auto broken = dir.write("broken.yaml", std::string(kServer) + "routes:\n" +
                                                   route("r", "/",
                                                         "{ name: l, algorithm: "
                                                         "leaky, limit: 1, window: "
                                                         "1s, key: [ip] }"));
  auto bad_config = rs::replay({"--config", broken, log}, dir);
  EXPECT_EQ(bad_config.exit_code, 2);
  EXPECT_NE(bad_config.err.find(broken + ":"), std::string::npos) << bad_config.err;
  EXPECT_NE(bad_config.err.find("leaky"), std::string::npos) << bad_config.err;
  EXPECT_EQ(bad_config.out, "");

  auto bad_baseline = rs::replay({"--config", config, "--baseline", broken, log}, dir);
  EXPECT_EQ(bad_baseline.exit_code, 2);
  EXPECT_NE(bad_baseline.err.find(broken + ":"), std::string::npos) << bad_baseline.err;

  auto no_config = rs::replay({"--config", dir / "none.yaml", log}, dir);
  EXPECT_EQ(no_config.exit_code, 2);
  EXPECT_NE(no_config.err.find(dir / "none.yaml"), std::string::npos) << no_config.err;

  auto no_log = rs::replay({"--config", config}, dir);
  EXPECT_EQ(no_log.exit_code, 2);
  EXPECT_NE(no_log.err.find("usage:"), std::string::npos) << no_log.err;
}

// Logs of a few MB, lines across the reader's buffer boundaries, CRLF line ends, several
// gzip members in one file (as `cat a.gz b.gz` or a rotating writer makes).
TEST(ReplayInputs, LongLogsCrlfAndConcatenatedGzipMembers) {
  rs::ScratchDir dir;
  const auto config = dir.write("known.yaml", kKnownConfig);
  std::string first, second;
  for (int i = 0; i < 12'000; ++i) {
    auto line = rs::access_line(at(10, i / 400, i % 400 * 2500), "/fixed/" + std::to_string(i),
                                rs::ip_field("10.4." + std::to_string(i % 200) + ".1"));
    (i < 6000 ? first : second) += line + (i % 3 == 0 ? "\r\n" : "\n");
  }
  ASSERT_GT(first.size() + second.size(), 2u << 20);
  const auto plain = dir.write("plain.log", first + second);
  write_gzip(dir / "a.gz", first);
  write_gzip(dir / "b.gz", second);
  const auto both = dir.write("both.gz", rs::read_text(dir / "a.gz") + rs::read_text(dir / "b.gz"));
  for (const auto& file : {plain, both}) {
    SCOPED_TRACE(file);
    auto r = rs::replay({"--config", config, "--json", file}, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto report = rs::parse_report(r.out);
    EXPECT_EQ(rs::number(report.at("lines").at("read")), 12'000);
    EXPECT_EQ(rs::number(report.at("lines").at("requests")), 12'000);
    EXPECT_EQ(rs::number(report.at("lines").at("bad")), 0) << r.out.substr(0, 400);
    EXPECT_TRUE(report.at("read_errors").as_array().empty());
    // 200 clients, 60 requests each in 30 s: 10 admitted per minute window each.
    EXPECT_EQ(rs::number(report.at("candidate").at("refused")), 200 * 50);
    EXPECT_EQ(report.at("last").as_string(), "2026-11-30T05:10:29.997500Z");
  }
}

// A line a little earlier than the one before it (two workers writing one file) is decided
// at the later time: the replay's clock never goes back.
TEST(ReplayInputs, OutOfOrderLinesAreDecidedAtTheLatestTime) {
  rs::ScratchDir dir;
  const auto config = dir.write("known.yaml", kKnownConfig);
  std::string log;
  for (int s : {10, 12, 11, 13})
    log +=
        rs::access_line(at(10, s), "/fixed/" + std::to_string(s), rs::ip_field("10.0.0.1")) + "\n";
  auto r = rs::replay(
      {"--config", config, "--json", "--decisions", dir / "d.tsv", dir.write("a.log", log)}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(rs::number(rs::parse_report(r.out).at("out_of_order")), 1);
  auto d = rs::read_decisions(dir / "d.tsv");
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[2].path, "/fixed/11");
  EXPECT_EQ(d[2].time, rs::ts(at(10, 12)));
  EXPECT_EQ(d[3].time, rs::ts(at(10, 13)));
}

// ------------------------------------------------------------------------- reports

// Shadow limits count what they would refuse and refuse nothing; a log without the inputs a
// limit keys on is decided as missing them, with a warning.
TEST(ReplayReport, ShadowLimitsAndMissingInputs) {
  rs::ScratchDir dir;
  const auto config = dir.write(
      "c.yaml", std::string(kServer) + "routes:\n" +
                    route("api", "/api/",
                          "{ name: per-key, algorithm: fixed_window, limit: 1, window: 1m, "
                          "key: [\"header:X-Api-Key\"], on_missing_key: shared }") +
                    route("web", "/",
                          "{ name: trial, algorithm: fixed_window, limit: 2, window: 1m, key: "
                          "[ip], mode: shadow }"));
  std::string log;
  for (int i = 0; i < 5; ++i)
    log += rs::access_line(at(10, i), "/web/" + std::to_string(i), rs::ip_field("10.5.0.1")) + "\n";
  for (int i = 0; i < 3; ++i)  // no "fields" with the header: one shared bucket
    log += rs::access_line(at(10, 10 + i), "/api/" + std::to_string(i),
                           rs::ip_field("10.5.0." + std::to_string(i))) +
           "\n";
  auto r = rs::replay(
      {"--config", config, "--json", "--decisions", dir / "d.tsv", dir.write("a.log", log)}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = rs::parse_report(r.out);
  const auto& trial = rs::limit_entry(report, "web", "trial");
  EXPECT_EQ(trial.at("mode").as_string(), "shadow");
  EXPECT_EQ(rs::number(trial.at("shadow_refused")), 3);
  EXPECT_EQ(rs::number(trial.at("refused")), 0);
  EXPECT_EQ(rs::number(report.at("candidate").at("shadow_only")), 3);
  EXPECT_EQ(rs::number(rs::limit_entry(report, "api", "per-key").at("refused")), 2);
  EXPECT_EQ(rs::number(report.at("candidate").at("refused")), 2);
  const auto& missing = report.at("candidate").at("missing_inputs").as_array();
  ASSERT_EQ(missing.size(), 1u) << r.out;
  EXPECT_EQ(std::string(missing[0].as_string()).rfind("header:x-api-key", 0), 0u) << r.out;
  for (const auto& d : rs::read_decisions(dir / "d.tsv"))
    if (d.route() == "web") {
      EXPECT_EQ(d.verdict(), "admitted") << d.path;
    }
}

// A caller a shadow limit would have refused is not one that came "closest to its limit
// without being refused"; one that stayed under it is.
TEST(ReplayReport, ShadowRefusedCallersAreNotAmongTheClosest) {
  rs::ScratchDir dir;
  const auto config = dir.write(
      "c.yaml", std::string(kServer) + "routes:\n" +
                    route("web", "/",
                          "{ name: trial, algorithm: fixed_window, limit: 3, window: 1m, key: "
                          "[ip], mode: shadow }"));
  std::string log;
  for (int i = 0; i < 5; ++i)  // three admitted (the third at 100%), then two would be refused
    log += rs::access_line(at(10, i), "/w", rs::ip_field("10.6.0.1")) + "\n";
  for (int i = 0; i < 2; ++i)  // two of three: 67%, never refused
    log += rs::access_line(at(10, 10 + i), "/w", rs::ip_field("10.6.0.2")) + "\n";
  auto r = rs::replay({"--config", config, dir.write("a.log", log)}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto closest = r.out.substr(r.out.find("closest to their limit"));
  EXPECT_NE(closest.find("ip=10.6.0.2"), std::string::npos) << r.out;
  EXPECT_EQ(closest.find("ip=10.6.0.1"), std::string::npos) << r.out;
}

TEST(ReplayInputs, UnsetVariablesTheReplayDoesNotNeedAreNotErrors) {
  rs::ScratchDir dir;
  // The key secret and the origin come from the environment in production; offline neither
  // is used. A limit's own value from an unset variable still is an error.
  const std::string text =
      "server:\n  listen: [127.0.0.1:0]\n"
      "upstreams:\n  origin: { url: \"${FLOODGATE_TEST_UNSET_ORIGIN}\" }\n"
      "store: { key_secret: \"${FLOODGATE_TEST_UNSET_SECRET}\" }\n"
      "routes:\n" +
      route("web", "/",
            "{ name: per-ip, algorithm: fixed_window, limit: 1, window: 1m, key: [ip] }");
  const auto log =
      dir.write("a.log", rs::access_line(at(10, 0), "/w", rs::ip_field("10.7.0.1")) + "\n" +
                             rs::access_line(at(10, 1), "/w", rs::ip_field("10.7.0.1")) + "\n");
  auto r = rs::replay({"--config", dir.write("c.yaml", text), "--json", log}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("FLOODGATE_TEST_UNSET_SECRET is not set;"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("FLOODGATE_TEST_UNSET_ORIGIN is not set;"), std::string::npos) << r.err;
  EXPECT_EQ(rs::number(rs::parse_report(r.out).at("candidate").at("refused")), 1);
  std::string needed = text;
  needed.replace(needed.find("limit: 1,"), 9, "limit: \"${FLOODGATE_TEST_UNSET_LIMIT}\",");
  auto bad = rs::replay({"--config", dir.write("d.yaml", needed), log}, dir);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("FLOODGATE_TEST_UNSET_LIMIT is not set"), std::string::npos) << bad.err;
}

TEST(ReplayReport, TopLimitsTheCallersListed) {
  rs::ScratchDir dir;
  const auto config = dir.write("known.yaml", kKnownConfig);
  std::string log;
  for (int c = 0; c < 6; ++c)
    for (int i = 0; i < 11 + c; ++i)
      log += rs::access_line(at(10, c * 5, i * 1000), "/fixed/x",
                             rs::ip_field("10.6.0." + std::to_string(c))) +
             "\n";
  const auto file = dir.write("a.log", log);
  auto r = rs::replay({"--config", config, "--json", "--top", "3", file}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = rs::parse_report(r.out);
  const auto& top = rs::limit_entry(report, "fixed", "fixed-minute").at("top_refused").as_array();
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].at("caller").as_string(), "ip=10.6.0.5");
  EXPECT_EQ(rs::number(top[0].at("refused")), 6);
  EXPECT_EQ(top[2].at("caller").as_string(), "ip=10.6.0.3");
  // The busiest callers by requests, from the summary /top uses live: 6 callers fit its 12
  // counters, so every count is exact.
  const auto& busiest =
      rs::limit_entry(report, "fixed", "fixed-minute").at("top_callers").as_array();
  ASSERT_EQ(busiest.size(), 3u);
  EXPECT_EQ(busiest[0].at("caller").as_string(), "ip=10.6.0.5");
  EXPECT_EQ(rs::number(busiest[0].at("requests")), 16);
  EXPECT_EQ(rs::number(busiest[0].at("refused")), 6);
  EXPECT_EQ(rs::number(busiest[0].at("error")), 0);
  EXPECT_EQ(rs::number(busiest[2].at("requests")), 14);
  auto text = rs::replay({"--config", config, "--top", "3", file}, dir);
  EXPECT_NE(text.out.find("busiest callers"), std::string::npos) << text.out;
  auto bad = rs::replay({"--config", config, "--top", "many", file}, dir);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--top"), std::string::npos) << bad.err;
}

// The baseline allows 10 a minute per client on "api" and 2 on "other"; the candidate 5 and 4.
std::string comparison_config(int api, int other) {
  auto limit = [](int n) {
    return "{ name: per-ip, algorithm: fixed_window, limit: " + std::to_string(n) +
           ", window: 1m, key: [ip] }";
  };
  return std::string(kServer) + "routes:\n" + route("api", "/api/", limit(api)) +
         route("other", "/", limit(other));
}

struct Comparison {
  rs::Run run;
  std::vector<rs::DecisionLine> decisions;
};

Comparison compare(const rs::ScratchDir& dir, const std::vector<std::string>& extra = {}) {
  const auto candidate = dir.write("candidate.yaml", comparison_config(5, 4));
  const auto baseline = dir.write("baseline.yaml", comparison_config(10, 2));
  std::string log;
  long long t = at(10, 0);
  // 4, 8 and 12 requests to the api from three clients, 5 to the other route from a fourth.
  for (int c = 1; c <= 3; ++c)
    for (int i = 0; i < 4 * c; ++i)
      log += rs::access_line(t += 1000, "/api/" + std::to_string(c) + "/" + std::to_string(i),
                             rs::ip_field("10.3.0." + std::to_string(c))) +
             "\n";
  for (int i = 0; i < 5; ++i)
    log +=
        rs::access_line(t += 1000, "/other/" + std::to_string(i), rs::ip_field("10.3.0.4")) + "\n";
  const auto file = dir.write("access.log", log);
  std::vector<std::string> args = {"--config",    candidate,     "--baseline", baseline,
                                   "--decisions", dir / "d.tsv", "--top",      "5"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(file);
  Comparison c{rs::replay(args, dir), {}};
  if (c.run.exit_code == 0) c.decisions = rs::read_decisions(dir / "d.tsv");
  return c;
}

TEST(ReplayReport, BaselineComparisonMatchesTheDecisions) {
  rs::ScratchDir dir;
  auto c = compare(dir, {"--json"});
  ASSERT_EQ(c.run.exit_code, 0) << c.run.err;
  auto report = rs::parse_report(c.run.out);
  // Baseline: client 3's 11th and 12th (api), client 4's 3rd to 5th (other).
  // Candidate: clients 2 and 3 beyond 5 (3 + 7), client 4's 5th.
  EXPECT_EQ(rs::number(report.at("baseline").at("refused")), 2 + 3);
  EXPECT_EQ(rs::number(report.at("candidate").at("refused")), 3 + 7 + 1);
  EXPECT_GT(rs::number(report.at("candidate").at("refused")),
            rs::number(report.at("baseline").at("refused")));

  ASSERT_EQ(c.decisions.size(), 4u + 8 + 12 + 5);
  std::int64_t only_candidate = 0, only_baseline = 0, candidate = 0, baseline = 0;
  std::map<std::string, std::int64_t> callers;
  for (const auto& d : c.decisions) {
    ASSERT_EQ(d.columns.size(), 6u);
    const bool cr = d.verdict(0) == "refused", br = d.verdict(1) == "refused";
    candidate += cr;
    baseline += br;
    if (cr && !br) ++only_candidate;
    if (br && !cr) ++only_baseline;
    EXPECT_EQ(d.route(0), d.route(1));
    if (cr && !br) ++callers["+ " + d.route(0) + "/per-ip"];
  }
  const auto& diff = report.at("difference");
  EXPECT_EQ(rs::number(diff.at("refused_only_by_candidate")), only_candidate);
  EXPECT_EQ(rs::number(diff.at("refused_only_by_baseline")), only_baseline);
  EXPECT_EQ(rs::number(report.at("candidate").at("refused")), candidate);
  EXPECT_EQ(rs::number(report.at("baseline").at("refused")), baseline);
  EXPECT_EQ(only_candidate, 3 + 5);  // client 2's 6th-8th, client 3's 6th-10th
  EXPECT_EQ(only_baseline, 2);       // client 4's 3rd and 4th
  // The callers behind the difference, largest first.
  std::vector<std::pair<std::string, std::int64_t>> top;
  for (const auto& e : diff.at("top_callers").as_array())
    top.emplace_back(e.at("caller").as_string(), rs::number(e.at("requests")));
  const std::vector<std::pair<std::string, std::int64_t>> expected_top = {
      {"+ api/per-ip ip=10.3.0.3", 5},
      {"+ api/per-ip ip=10.3.0.2", 3},
      {"- other/per-ip ip=10.3.0.4", 2}};
  EXPECT_EQ(top, expected_top) << c.run.out;
}

TEST(ReplayReport, TextAndHtmlReports) {
  rs::ScratchDir dir;
  const auto html_file = dir / "report.html";
  auto c = compare(dir, {"--html", html_file});
  ASSERT_EQ(c.run.exit_code, 0) << c.run.err;
  EXPECT_NE(c.run.out.find("candidate: " + (dir / "candidate.yaml")), std::string::npos)
      << c.run.out;
  EXPECT_NE(c.run.out.find("baseline: " + (dir / "baseline.yaml")), std::string::npos);
  EXPECT_NE(c.run.out.find("refused only by the candidate: 8; only by the baseline: 2"),
            std::string::npos)
      << c.run.out;
  const auto html = rs::read_text(html_file);
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  auto svg = html.find("<svg");
  ASSERT_NE(svg, std::string::npos) << html;
  EXPECT_NE(html.find("</svg>", svg), std::string::npos);
  EXPECT_NE(html.find("<polyline", svg), std::string::npos);
  EXPECT_NE(html.find("api/per-ip"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

}  // namespace
}  // namespace floodgate::testing
