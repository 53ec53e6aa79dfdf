// The replay's line parsers (floodgate's JSON access log, nginx `combined`) and the UTC
// timestamps they read.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "floodgate/limit/utc_time.hpp"
#include "replay/log_record.hpp"

namespace {

using namespace floodgate;
using replay::LineKind;
using replay::LogRecord;

const limit::Micros k051050 = limit::micros_of(2026, 11, 30, 5, 10, 50);

std::map<std::string, std::string> fields_of(const LogRecord& r) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : r.fields) out[std::string(k)] = std::string(v);
  return out;
}

// ------------------------------------------------------------------------- timestamps

TEST(UtcTime, FormatsWithMicroseconds) {
  EXPECT_EQ(limit::format_utc(k051050 + 286'123), "2026-11-30T05:10:50.286123Z");
  EXPECT_EQ(limit::format_utc(k051050), "2026-11-30T05:10:50.000000Z");
  EXPECT_EQ(limit::format_utc(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(limit::micros_of(2026, 11, 30, 5, 10, 0), 1'796'015'400LL * 1'000'000);
  EXPECT_EQ(limit::micros_of(2024, 2, 29, 23, 59, 59), 1'709'251'199LL * 1'000'000);
}

TEST(UtcTime, ParsesRfc3339) {
  limit::Micros t = 0;
  ASSERT_TRUE(limit::parse_utc("2026-11-30T05:10:50.286123Z", t));
  EXPECT_EQ(t, k051050 + 286'123);
  ASSERT_TRUE(limit::parse_utc("2026-11-30T05:10:50Z", t));
  EXPECT_EQ(t, k051050);
  ASSERT_TRUE(limit::parse_utc("2026-11-30T05:10:50.5Z", t));
  EXPECT_EQ(t, k051050 + 500'000);
  ASSERT_TRUE(limit::parse_utc("2026-11-30T05:10:50.123456789Z", t));  // nanoseconds cut
  EXPECT_EQ(t, k051050 + 123'456);
  ASSERT_TRUE(limit::parse_utc("2026-11-30T06:10:50.000001+01:00", t));
  EXPECT_EQ(t, k051050 + 1);
  ASSERT_TRUE(limit::parse_utc("2026-11-30T00:40:50-04:30", t));
  EXPECT_EQ(t, k051050);
  ASSERT_TRUE(limit::parse_utc("2026-11-30t05:10:50z", t));
  EXPECT_EQ(t, k051050);
  ASSERT_TRUE(limit::parse_utc("2026-11-30 05:10:50Z", t));
  EXPECT_EQ(t, k051050);
  // Round trip.
  for (limit::Micros v : {k051050, k051050 + 999'999, limit::Micros{1}})
    ASSERT_TRUE(limit::parse_utc(limit::format_utc(v), t) && t == v) << v;
}

TEST(UtcTime, RefusesWhatIsNotRfc3339) {
  limit::Micros t = 0;
  for (const char* bad :
       {"", "yesterday", "2026-11-30T05:10:50", "2026-11-30T05:10:50.Z", "2026-13-30T05:10:50Z",
        "2026-11-32T05:10:50Z", "2026-11-30T24:10:50Z", "2026-11-30T05:60:50Z",
        "2026-11-30T05:10:61Z", "2026-11-30T05:10:50.1234567890Z", "2026-11-30T05:10:50+0100",
        "2026-11-30T05:10:50Zjunk", "2026/11/30T05:10:50Z", "2026-11-30T05:10:50+24:00"})
    EXPECT_FALSE(limit::parse_utc(bad, t)) << bad;
}

// ------------------------------------------------------------------------- JSON lines

TEST(ParseAccessJson, ReadsARequestLine) {
  const std::string line =
      R"({"type":"access","ts":"2026-11-30T05:10:50.286123Z","pop":"fra1","peer":"10.1.2.3",)"
      R"("method":"POST","path":"/v1/x","route":"api","status":429,"decision":"limited",)"
      R"("limit":"per-key","key":"rl:api:per-key:{ab}","duration_ms":12.5,"upstream_ms":0.000,)"
      R"("fields":{"ip":"203.0.113.9","host":"api.example","header:x-api-key":"k1",)"
      R"("query:k":"v","jwt:tenant":"acme"},"settle":{"x-tokens-used":"42"}})";
  LogRecord r;
  std::string scratch;
  auto p = replay::parse_access_json(line, r, scratch);
  ASSERT_EQ(p.kind, LineKind::request) << p.why;
  EXPECT_EQ(r.at, k051050 + 286'123);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/x");
  EXPECT_EQ(r.peer, "10.1.2.3");
  EXPECT_EQ(r.client, "203.0.113.9");
  EXPECT_EQ(r.host, "api.example");
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.duration_us, 12'500);
  EXPECT_TRUE(r.live_refused);
  EXPECT_TRUE(r.has_fields);
  EXPECT_EQ(fields_of(r),
            (std::map<std::string, std::string>{
                {"header:x-api-key", "k1"}, {"query:k", "v"}, {"jwt:tenant", "acme"}}));
  ASSERT_EQ(r.settle.size(), 1u);
  EXPECT_EQ(r.settle[0].first, "x-tokens-used");
  EXPECT_EQ(r.settle[0].second, "42");
}

TEST(ParseAccessJson, OlderLinesAndOtherDecisions) {
  LogRecord r;
  std::string scratch;
  // No fields: the client is the peer; admitted at the time.
  auto p = replay::parse_access_json(
      R"({"type":"access","ts":"2026-11-30T05:10:50Z","peer":"10.1.2.3","method":"GET",)"
      R"("path":"/","status":200,"decision":"admitted","duration_ms":1})",
      r, scratch);
  ASSERT_EQ(p.kind, LineKind::request) << p.why;
  EXPECT_FALSE(r.has_fields);
  EXPECT_FALSE(r.live_refused);
  EXPECT_TRUE(r.client.empty());
  EXPECT_EQ(r.peer, "10.1.2.3");
  // The record is cleared between lines.
  p = replay::parse_access_json(
      R"({"ts":"2026-11-30T05:10:51Z","type":"access","method":"GET","path":"/b","status":404})", r,
      scratch);
  ASSERT_EQ(p.kind, LineKind::request) << p.why;
  EXPECT_EQ(r.peer, "");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.duration_us, 0);
}

TEST(ParseAccessJson, UnescapesStrings) {
  LogRecord r;
  std::string scratch;
  auto p = replay::parse_access_json(
      R"({"type":"access","ts":"2026-11-30T05:10:50Z","method":"GET","path":"/a\"b\\c\/d",)"
      R"("fields":{"header:x-name":"caf\u00e9 \ud83d\ude00 \n\t","header:x-plain":"plain"}})",
      r, scratch);
  ASSERT_EQ(p.kind, LineKind::request) << p.why;
  EXPECT_EQ(r.path, "/a\"b\\c/d");
  auto f = fields_of(r);
  EXPECT_EQ(f["header:x-name"], "caf\xc3\xa9 \xf0\x9f\x98\x80 \n\t");
  EXPECT_EQ(f["header:x-plain"], "plain");
}

TEST(ParseAccessJson, SkipsOtherLogLinesAndValuesItDoesNotNeed) {
  LogRecord r;
  std::string scratch;
  auto p = replay::parse_access_json(
      R"({"time":"2026-11-30T05:10:50.000Z","level":"info","msg":"config reloaded"})", r, scratch);
  EXPECT_EQ(p.kind, LineKind::skipped);
  p = replay::parse_access_json(R"({})", r, scratch);
  EXPECT_EQ(p.kind, LineKind::skipped);
  // Unknown keys of any JSON type, nested, are passed over.
  p = replay::parse_access_json(
      R"({"type":"access","extra":{"a":[1,2,{"b":null}],"c":true},"n":-1.5e3,"ts":)"
      R"("2026-11-30T05:10:50Z","method":"GET","path":"/","fields":{"ip":"::1","n":7}})",
      r, scratch);
  ASSERT_EQ(p.kind, LineKind::request) << p.why;
  EXPECT_EQ(r.client, "::1");
  EXPECT_TRUE(r.fields.empty());
}

TEST(ParseAccessJson, BadLinesSayWhy) {
  const std::map<std::string, std::string> cases = {
      {R"([1,2])", "not a JSON object"},
      {R"({"type":"access","ts":"2026-11-30T05:10:50Z","method":"GET",)", "malformed JSON"},
      {R"({"type":"access","ts":"2026-11-30T05:10:50Z","method":"GET","path":"/"} x)",
       "text after the JSON object"},
      {R"({"type":"access","method":"GET","path":"/"})", "no ts"},
      {R"({"type":"access","ts":"30/Nov/2026","method":"GET","path":"/"})", "unreadable ts"},
      {R"({"type":"access","ts":"2026-11-30T05:10:50Z","path":"/"})", "no method or path"},
      {R"({"type":"access","ts":"2026-11-30T05:10:50Z","method":"GET","path":"\x"})",
       "malformed JSON"},
      {R"({"type":"access","ts":"2026-11-30T05:10:50Z","method":"GET","path":"\ud83d"})",
       "malformed JSON"},
      {R"({"type":"access","ts":"2026-11-30T05:10:50Z","method":"GET","path":"/","status":"x"})",
       "malformed JSON"},
      {R"({"type":"access","ts":"2026-11-30T05:10:50Z","method":"GET","path":"/","fields":[]})",
       "malformed JSON"},
  };
  for (const auto& [line, why] : cases) {
    LogRecord r;
    std::string scratch;
    auto p = replay::parse_access_json(line, r, scratch);
    EXPECT_EQ(p.kind, LineKind::bad) << line;
    EXPECT_NE(std::string(p.why).find(why), std::string::npos) << line << ": " << p.why;
  }
}

TEST(ParseAccessJson, DeeplyNestedValuesAreRefusedNotRecursedInto) {
  std::string deep =
      R"({"type":"access","x":)" + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  LogRecord r;
  std::string scratch;
  EXPECT_EQ(replay::parse_access_json(deep, r, scratch).kind, LineKind::bad);
}

// ------------------------------------------------------------------------- nginx combined

TEST(ParseNginx, ReadsACombinedLine) {
  LogRecord r;
  auto p = replay::parse_nginx_combined(
      R"(203.0.113.7 - alice [30/Nov/2026:06:10:50 +0100] "GET /search/x?k=abc&z=1 HTTP/1.1" )"
      R"x(200 512 "https://ref.example/page" "Mozilla/5.0 (X11; Linux)")x",
      r);
  ASSERT_EQ(p.kind, LineKind::request) << p.why;
  EXPECT_EQ(r.at, k051050);
  EXPECT_EQ(r.client, "203.0.113.7");
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.path, "/search/x");
  EXPECT_EQ(r.query, "k=abc&z=1");
  EXPECT_EQ(r.host, "");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.has_fields);
  EXPECT_EQ(fields_of(r), (std::map<std::string, std::string>{
                              {"header:referer", "https://ref.example/page"},
                              {"header:user-agent", "Mozilla/5.0 (X11; Linux)"}}));
}

TEST(ParseNginx, TimeZonesAndMonths) {
  LogRecord r;
  ASSERT_EQ(replay::parse_nginx_combined(
                R"(::1 - - [30/Nov/2026:00:40:50 -0430] "GET / HTTP/1.1" 200 1 "-" "-")", r)
                .kind,
            LineKind::request);
  EXPECT_EQ(r.at, k051050);
  EXPECT_EQ(r.client, "::1");
  EXPECT_TRUE(r.fields.empty());  // "-": no referer, no agent
  ASSERT_EQ(replay::parse_nginx_combined(
                R"(10.0.0.1 - - [01/Jan/2027:00:00:00 +0000] "HEAD /x HTTP/1.0" 304 0)", r)
                .kind,
            LineKind::request);
  EXPECT_EQ(r.at, limit::micros_of(2027, 1, 1, 0, 0, 0));
  EXPECT_EQ(r.method, "HEAD");
  EXPECT_EQ(r.status, 304);
  const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int m = 0; m < 12; ++m) {
    std::string line = "10.0.0.1 - - [15/" + std::string(months[m]) +
                       "/2026:12:00:00 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"";
    ASSERT_EQ(replay::parse_nginx_combined(line, r).kind, LineKind::request) << line;
    EXPECT_EQ(r.at, limit::micros_of(2026, m + 1, 15, 12, 0, 0)) << line;
  }
}

TEST(ParseNginx, AbsoluteTargetsGiveTheHostWithoutPort) {
  LogRecord r;
  ASSERT_EQ(replay::parse_nginx_combined(
                R"(10.0.0.1 - - [30/Nov/2026:05:10:50 +0000] "GET http://api.example:8080/v1?a=b )"
                R"(HTTP/1.1" 200 1 "-" "-")",
                r)
                .kind,
            LineKind::request);
  EXPECT_EQ(r.host, "api.example");  // without the port, as LogRecord::host is documented
  EXPECT_EQ(r.path, "/v1");
  EXPECT_EQ(r.query, "a=b");
}

TEST(ParseNginx, LinesWithoutARequestAreSkipped) {
  LogRecord r;
  EXPECT_EQ(replay::parse_nginx_combined(
                R"(10.0.0.1 - - [30/Nov/2026:05:10:50 +0000] "-" 400 0 "-" "-")", r)
                .kind,
            LineKind::skipped);
  EXPECT_EQ(
      replay::parse_nginx_combined(
          R"(10.0.0.1 - - [30/Nov/2026:05:10:50 +0000] "OPTIONS * HTTP/1.1" 200 0 "-" "-")", r)
          .kind,
      LineKind::skipped);
}

TEST(ParseNginx, BadLinesSayWhy) {
  const std::map<std::string, std::string> cases = {
      {"garbage", "not a combined log line"},
      {"10.0.0.1 - - no time here", "no [time]"},
      {R"(10.0.0.1 - - [30/Nov/2026:05:10:50] "GET / HTTP/1.1" 200 1)", "unreadable [time]"},
      {R"(10.0.0.1 - - [30/Xyz/2026:05:10:50 +0000] "GET / HTTP/1.1" 200 1)", "unreadable [time]"},
      {R"(10.0.0.1 - - [31/Nov/2026:25:10:50 +0000] "GET / HTTP/1.1" 200 1)", "unreadable [time]"},
      {R"(10.0.0.1 - - [30/Nov/2026:05:10:50 +0000] GET / HTTP/1.1 200 1)", "no \"request\""},
      {R"(10.0.0.1 - - [30/Nov/2026:05:10:50 +0000] "GET / HTTP/1.1" OK)", "no status"},
  };
  for (const auto& [line, why] : cases) {
    LogRecord r;
    auto p = replay::parse_nginx_combined(line, r);
    EXPECT_EQ(p.kind, LineKind::bad) << line;
    EXPECT_EQ(p.why, why) << line;
  }
}

}  // namespace
