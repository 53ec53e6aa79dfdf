// The admin API (issue 20 item 2) on the real binary, with curl: a caller looked up, reset
// and exempted through one instance and seen on a second sharing the Redis store within a
// second; the token checked; every change logged and counted; the API off without a token.
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/json.hpp>

#include <cctype>
#include <future>
#include <thread>

#include "cannot_run.hpp"
#include "fake_redis.hpp"
#include "floodgate_process.hpp"
#include "harness.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kToken = "oncall-token-0123456789abcdef";
const std::string kAuth = std::string("-H 'Authorization: Bearer ") + kToken + "' ";

const std::string kRoutes = R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits: [{ name: burst, algorithm: token_bucket, capacity: 3, refill_rate: 1/h, key: [ip] }]
)";

// "STATUS BODY" of a curl to `url` with `args` (method, headers, body).
std::string curl(const std::string& args, const std::string& url) {
  return command_output("curl -s -w ' %{http_code}' " + args + "'" + url + "'", 20);
}
int status_of(const std::string& out) {
  return std::stoi(out.substr(out.rfind(' ') + 1));
}

int get_status(std::uint16_t port) {
  auto r = get(port, "/x");
  return r ? r->result_int() : -1;
}

struct Instance {
  std::uint16_t port;
  std::uint16_t admin;
  std::string path;
  std::unique_ptr<ChildProcess> fg;
  Instance(const std::string& name, std::uint16_t port_, std::uint16_t admin_,
           const std::string& yaml)
      : port(port_), admin(admin_) {
    path = write_temp_file(name, yaml);
    fg = start_floodgate(path);  // its log on the pipe too, where log_lines() reads it
    wait_serving(admin, "/healthz");
    wait_listening(port);
  }
  std::string url(const std::string& target) const {
    return "http://127.0.0.1:" + std::to_string(admin) + target;
  }
  // The process's own log so far (stdout: the text log), read for a while.
  std::string log_lines(std::chrono::milliseconds for_how_long) {
    std::string out;
    const auto until = std::chrono::steady_clock::now() + for_how_long;
    while (std::chrono::steady_clock::now() < until) {
      auto line = fg->read_line(100ms);
      if (!line.empty()) out += line + "\n";
    }
    return out;
  }
};

std::string admin_yaml(std::uint16_t admin, bool token) {
  return "admin: { listen: 127.0.0.1:" + std::to_string(admin) +
         (token ? std::string(", tokens: { oncall: ") + kToken + " }" : std::string()) + " }\n";
}

// An instance on the memory store in front of `origin`, with or without a token.
Instance memory_instance(const std::string& name, const Origin& origin, bool token) {
  const auto port = free_port(), admin = free_port();
  return Instance(name, port, admin,
                  "server: { listen: [127.0.0.1:" + std::to_string(port) + "], threads: 1 }\n" +
                      admin_yaml(admin, token) + "upstreams: { origin: { url: \"http://127.0.0.1:" +
                      std::to_string(origin.port()) + "\" } }\nroutes:" + kRoutes);
}

TEST(AdminApi, OffWithoutATokenAndTheTokenIsChecked) {
  Origin origin;
  Instance off = memory_instance("api-off.yaml", origin, false);
  auto r = curl(kAuth, off.url("/overrides"));
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_NE(r.find("the admin API is off"), std::string::npos) << r;
  EXPECT_EQ(status_of(curl("", off.url("/top"))), 200);  // the read-only endpoints stay open

  Instance on = memory_instance("api-on.yaml", origin, true);
  EXPECT_EQ(status_of(curl("", on.url("/overrides"))), 401);
  EXPECT_EQ(status_of(curl("-H 'Authorization: Bearer oncall-token-0123456789abcdeX' ",
                           on.url("/overrides"))),
            401);
  auto challenge = command_output("curl -s -D - -o /dev/null '" + on.url("/keys") + "'", 20);
  EXPECT_NE(challenge.find("WWW-Authenticate: Bearer realm=\"floodgate-admin\""), std::string::npos)
      << challenge;
  EXPECT_EQ(status_of(curl(kAuth, on.url("/overrides"))), 200);
  auto metrics = curl("", on.url("/metrics"));
  EXPECT_EQ(metric(metrics, "floodgate_admin_unauthorized_total"), 3u) << metrics;
  // Bad requests are named, not guessed at.
  auto bad =
      curl(kAuth + "-X PUT -d '{\"limit\": 5}' ", on.url("/overrides/burst/jwt:tenant=acme"));
  EXPECT_EQ(status_of(bad), 400);
  EXPECT_NE(bad.find("expected \\\"ip=\\\""), std::string::npos) << bad;
  EXPECT_EQ(
      status_of(curl(kAuth + "-X PUT -d '{\"limit\": 5}' ", on.url("/overrides/nope/ip=1.2.3.4"))),
      404);
  EXPECT_EQ(
      status_of(curl(kAuth + "-X PUT -d '{\"limit\": 0}' ", on.url("/overrides/burst/ip=1.2.3.4"))),
      400);
  EXPECT_EQ(status_of(curl(kAuth + "-X PUT -d '{\"exempt\": true, \"ttl\": \"soon\"}' ",
                           on.url("/overrides/burst/ip=1.2.3.4"))),
            400);
  EXPECT_EQ(status_of(curl(kAuth, on.url("/keys?route=api&limit=nope&key=ip%3D1.2.3.4"))), 404);
}

// A change that waits on a slow store does not hold up the health endpoints: the API's calls
// run off the admin listener's loop. The store here takes 1.5 s over each HSET.
TEST(AdminApi, AStoreThatStallsDoesNotHoldUpTheHealthEndpoints) {
  FakeRedis fake;
  auto behave = FakeRedis::behave();
  fake.script([behave](const std::vector<std::string>& c) {
    if (c[0] == "HSET") return FakeRedis::later(":1\r\n", 1500ms);
    if (c[0] == "INCR") return FakeRedis::reply(":1\r\n");
    if (c[0] == "GET") return FakeRedis::reply("$-1\r\n");
    if (c[0] == "HGETALL") return FakeRedis::reply("*0\r\n");
    return behave(c);
  });
  Origin origin;
  const auto port = free_port(), admin = free_port();
  Instance fg(
      "api-slow.yaml", port, admin,
      redis_config(port, origin.port(), fake.port(), kRoutes, "500ms", admin_yaml(admin, true)));
  auto put = std::async(std::launch::async, [&] {
    return curl(kAuth + "-X PUT -d '{\"exempt\":true}' ",
                fg.url("/overrides/burst/ip%3D127.0.0.1"));
  });
  // Wait until the store has the HSET (the PUT is then waiting on it) ...
  ASSERT_TRUE(eventually([&] { return fake.count("HSET") > 0; }, 3s));
  // ... and ask for health meanwhile: answered while the PUT still waits.
  auto health = curl("", fg.url("/healthz"));
  auto metrics = curl("", fg.url("/metrics"));
  EXPECT_EQ(put.wait_for(0ms), std::future_status::timeout) << "the PUT ended first";
  EXPECT_EQ(status_of(health), 200) << health;
  EXPECT_EQ(status_of(metrics), 200);
  EXPECT_EQ(status_of(put.get()), 200);
}

// The issue's on-call session: a caller looked up, reset and exempted on one instance, seen
// on a second one sharing the store.
TEST(AdminApi, ACallerLookedUpResetAndExemptedOnOneInstanceIsSeenOnTheOther) {
  RedisServer redis;
  Origin origin;
  auto yaml = [&](std::uint16_t port, std::uint16_t admin) {
    return redis_config(port, origin.port(), redis.port(), kRoutes, "500ms",
                        admin_yaml(admin, true));
  };
  const auto pa = free_port(), aa = free_port(), pb = free_port(), ab = free_port();
  Instance a("api-a.yaml", pa, aa, yaml(pa, aa));
  Instance b("api-b.yaml", pb, ab, yaml(pb, ab));
  const std::string key = "/keys?route=api&limit=burst&key=ip%3D127.0.0.1";

  // The caller spends its three on B, then is refused there.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(get_status(pb), 200);
  EXPECT_EQ(get_status(pb), 429);
  // Looked up on A: the store's state, shared.
  auto looked = curl(kAuth, a.url(key));
  EXPECT_EQ(status_of(looked), 200) << looked;
  EXPECT_NE(looked.find("\"quota\":3,\"remaining\":0"), std::string::npos) << looked;
  // Reset on A: the store forgets the caller's state, and B, which remembers refusing it
  // (its deny cache, until the refill hours away), forgets that within a second.
  auto reset = curl(kAuth + "-X DELETE ", a.url(key));
  EXPECT_EQ(status_of(reset), 200) << reset;
  EXPECT_NE(curl(kAuth, a.url(key)).find("\"remaining\":3"), std::string::npos);
  // (B's other worker, which never refused it, may admit it sooner: asked only after the
  // second the API promises, every worker of B agrees.)
  std::this_thread::sleep_for(1s);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(get_status(pb), 200) << i;
  EXPECT_EQ(get_status(pb), 429);  // three again, no more

  // Exempted on A: B applies it within a second, without a reload.
  EXPECT_EQ(get_status(pa), 429);
  auto put = curl(kAuth + "-X PUT -d '{\"exempt\": true, \"ttl\": \"10m\"}' ",
                  a.url("/overrides/burst/ip=127.0.0.1"));
  EXPECT_EQ(status_of(put), 200) << put;
  const auto set_at = std::chrono::steady_clock::now();
  EXPECT_TRUE(eventually([&] { return get_status(pb) == 200; }, 1s));
  const auto seen_after = std::chrono::steady_clock::now() - set_at;
  EXPECT_LT(seen_after, 1s);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(get_status(pb), 200);
  EXPECT_EQ(get_status(pa), 200);  // and on A at once
  auto listed = curl(kAuth, b.url("/overrides"));
  EXPECT_NE(listed.find("\"key\":\"ip=127.0.0.1\",\"exempt\":true"), std::string::npos) << listed;
  EXPECT_NE(listed.find("\"by\":\"oncall\""), std::string::npos) << listed;

  // A quota of its own instead, then removed: B refuses again within a second.
  EXPECT_EQ(status_of(curl(kAuth + "-X DELETE ", b.url("/overrides/burst/ip=127.0.0.1"))), 200);
  EXPECT_TRUE(eventually([&] { return get_status(pa) == 429; }, 1s));
  EXPECT_EQ(status_of(curl(kAuth + "-X DELETE ", b.url("/overrides/burst/ip=127.0.0.1"))), 404);

  // Every change was counted where it was made, and logged with the token's name.
  auto ma = curl("", a.url("/metrics"));
  EXPECT_EQ(metric(ma, R"(floodgate_admin_changes_total{action="key_reset"})"), 1u) << ma;
  EXPECT_EQ(metric(ma, R"(floodgate_admin_changes_total{action="override_set"})"), 1u);
  auto mb = curl("", b.url("/metrics"));
  EXPECT_EQ(metric(mb, R"(floodgate_admin_changes_total{action="override_removed"})"), 1u);
  auto log_a = a.log_lines(300ms);
  EXPECT_NE(log_a.find("admin: oncall reset key ip=127.0.0.1 of api/burst"), std::string::npos)
      << log_a;
  EXPECT_NE(log_a.find("admin: oncall set the override of burst for ip=127.0.0.1: exempt until"),
            std::string::npos)
      << log_a;
  EXPECT_NE(b.log_lines(300ms).find("admin: oncall removed the override of burst"),
            std::string::npos);
}

}  // namespace
}  // namespace floodgate::testing

namespace floodgate::testing {
namespace {

// redis-cli on `port` with `args` as they are, no shell between (an override's field is
// "LIMIT\nCALLER": a newline a shell command would split at): the first line it prints.
std::string cli_line(std::uint16_t port, std::vector<std::string> args) {
  args.insert(args.begin(), {find_tool("redis-cli"), "-p", std::to_string(port), "--raw"});
  ChildProcess p(args);
  return p.read_line(5s);
}

// A lapsed override is tidied out of Redis by compare-and-delete: gone once its time has
// passed and an instance reads the hash again, while a field written anew in its place (the
// value differs from the one read) would stay.
TEST(AdminApi, ALapsedOverrideIsTidiedOutOfTheStore) {
  RedisServer redis;
  Origin origin;
  const auto port = free_port(), admin = free_port();
  Instance a(
      "api-lapse.yaml", port, admin,
      redis_config(port, origin.port(), redis.port(), kRoutes, "500ms", admin_yaml(admin, true)));
  auto put = curl(kAuth + "-X PUT -d '{\"exempt\": true, \"ttl\": 1}' ",
                  a.url("/overrides/burst/ip=192.0.2.9"));
  ASSERT_EQ(status_of(put), 200) << put;
  const auto hash = redis.cli("--raw KEYS *overrides}");
  ASSERT_FALSE(hash.empty());
  ASSERT_EQ(redis.cli("HLEN " + hash), "1");
  const auto field = redis.cli("--raw HKEYS " + hash);
  ASSERT_EQ(field, "burst\nip=192.0.2.9");
  ASSERT_EQ(cli_line(redis.port(), {"HEXISTS", hash, field}), "1");
  // A field of the same hash whose value is not what any instance read: never deleted.
  redis.cli("HSET " + hash + " other-field not-an-override");
  std::this_thread::sleep_for(1200ms);     // the override lapses
  redis.cli("INCR " + hash + ":version");  // the instance reads the hash again
  EXPECT_TRUE(eventually(
      [&] {
        return cli_line(redis.port(), {"HEXISTS", hash, field}) == "0";
      },
      3s));
  EXPECT_EQ(redis.cli("HEXISTS " + hash + " other-field"), "1");
}

// The arguments of one command as redis-cli prints it under MONITOR: `TIME [DB ADDR] "ARG"
// "ARG"...`, each quoted with \\, \", \n, \r, \t, \a, \b and \xHH escapes.
std::vector<std::string> monitored_args(const std::string& line) {
  std::vector<std::string> out;
  std::size_t i = line.find(']');
  if (i == std::string::npos) return out;
  while ((i = line.find('"', i)) != std::string::npos) {
    std::string arg;
    for (++i; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] != '\\' || i + 1 >= line.size()) {
        arg += line[i];
        continue;
      }
      const char e = line[++i];
      if (e == 'x' && i + 2 < line.size()) {
        arg += static_cast<char>(std::stoi(line.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        arg += e == 'n'   ? '\n'
               : e == 'r' ? '\r'
               : e == 't' ? '\t'
               : e == 'a' ? '\a'
               : e == 'b' ? '\b'
                          : e;
      }
    }
    out.push_back(std::move(arg));
    ++i;
  }
  return out;
}

// The race the compare-and-delete exists for: an instance has read a lapsed override, and
// before its delete lands another PUTs the same caller's override again. The very command the
// binary sends to tidy (seen with MONITOR), sent again after the field was written anew,
// deletes nothing.
TEST(AdminApi, TheTidyingDeletesNothingWrittenAfterItsRead) {
  RedisServer redis;
  Origin origin;
  const auto port = free_port(), admin = free_port();
  Instance a(
      "api-race.yaml", port, admin,
      redis_config(port, origin.port(), redis.port(), kRoutes, "500ms", admin_yaml(admin, true)));
  const auto redis_cli = find_tool("redis-cli");
  ChildProcess monitor({redis_cli, "-p", std::to_string(redis.port()), "MONITOR"});
  ASSERT_EQ(monitor.read_line(5s), "OK");
  auto put = curl(kAuth + "-X PUT -d '{\"exempt\": true, \"ttl\": 1}' ",
                  a.url("/overrides/burst/ip=192.0.2.9"));
  ASSERT_EQ(status_of(put), 200) << put;
  const auto hash = redis.cli("--raw KEYS *overrides}");
  const auto field = redis.cli("--raw HKEYS " + hash);
  std::this_thread::sleep_for(1200ms);     // the override lapses
  redis.cli("INCR " + hash + ":version");  // the instance reads the hash again and tidies
  std::vector<std::string> tidy;
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (tidy.empty() && std::chrono::steady_clock::now() < until) {
    const auto line = monitor.read_line(1s);
    if (line.find("\"EVAL\"") != std::string::npos) tidy = monitored_args(line);
  }
  ASSERT_EQ(tidy.size(), 6u) << "no EVAL seen";
  EXPECT_EQ(tidy[3], hash);
  EXPECT_EQ(tidy[4], field);
  EXPECT_TRUE(  // it did tidy the lapsed one
      eventually(
          [&] {
            return cli_line(redis.port(), {"HEXISTS", hash, field}) == "0";
          },
          3s));

  // Now the race: the field holds a new override when the same tidying arrives.
  const std::string fresh = R"({"exempt":true,"until_ms":9999999999999})";
  ASSERT_EQ(cli_line(redis.port(), {"HSET", hash, field, fresh}), "1");
  std::vector<std::string> again = {redis_cli, "-p", std::to_string(redis.port())};
  again.insert(again.end(), tidy.begin(), tidy.end());
  ChildProcess late(again);
  EXPECT_EQ(late.read_line(5s), "0");
  EXPECT_EQ(cli_line(redis.port(), {"HGET", hash, field}), fresh);
}

}  // namespace
}  // namespace floodgate::testing

namespace floodgate::testing {
namespace {

// Issue 34: callers keyed by a header, whose values may hold anything.
std::string user_yaml(std::uint16_t port, std::uint16_t admin, const Origin& origin) {
  return "server: { listen: [127.0.0.1:" + std::to_string(port) + "], threads: 1 }\n" +
         admin_yaml(admin, true) +
         "upstreams: { origin: { url: \"http://127.0.0.1:" + std::to_string(origin.port()) +
         "\" } }\nroutes:" + R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits: [{ name: per-user, algorithm: token_bucket, capacity: 3, refill_rate: 1/h,
               key: ["header:x-user"] }]
)";
}

// Every byte but the unreserved ones as %XX: a caller's text in a URL.
std::string percent_encoded(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

int user_status(std::uint16_t port, const std::string& user) {
  auto r = get(port, "/x", "X-User: " + user + "\r\n");
  return r ? r->result_int() : -1;
}

// Item 4: a token holder could forge a log line attributed to another token with a CR LF in
// a key. Raw control bytes are refused, and the text log escapes whatever else holds one (here
// the config file's path, which the start-up line names).
TEST(AdminApi, ControlBytesInAKeyAreRefusedAndTheTextLogWritesNoLineOfAValues) {
  Origin origin;
  const auto port = free_port(), admin = free_port();
  Instance fg("api-audit\nFORGED path \x1b[31m", port, admin, user_yaml(port, admin, origin));
  const std::string forged =
      "%0d%0a2026-01-01T00:00:00.000Z%20info%20admin:%20root%20removed%20the%20override";
  for (const auto& key : {"header:x-user=bob" + forged, std::string("header:x-user=bob%00x"),
                          std::string("header:x-user=bob%1b%5B2Kx")}) {
    auto put = curl(kAuth + "-X PUT -d '{\"limit\": 5}' ", fg.url("/overrides/per-user/" + key));
    EXPECT_EQ(status_of(put), 400) << key << ": " << put;
    EXPECT_NE(put.find("control bytes"), std::string::npos) << put;
    auto reset = curl(kAuth + "-X DELETE ",
                      fg.url("/keys?route=api&limit=per-user&key=" + substitute(key, "=", "%3D")));
    EXPECT_EQ(status_of(reset), 400) << key << ": " << reset;
    EXPECT_EQ(status_of(curl(kAuth + "-X DELETE ", fg.url("/overrides/per-user/" + key))), 400);
  }
  // The same caller written as /top shows such bytes is taken, and logged as written.
  EXPECT_EQ(status_of(curl(kAuth + "-X PUT -d '{\"limit\": 5}' ",
                           fg.url("/overrides/per-user/header:x-user=bob%5Cx0d%5Cx0aroot"))),
            200);
  const auto log = fg.log_lines(500ms);
  EXPECT_EQ(log.find("\n2026-01-01T00:00:00.000Z"), std::string::npos) << log;
  EXPECT_EQ(log.find("root removed"), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
  EXPECT_EQ(log.find("\nFORGED"), std::string::npos) << log;
  EXPECT_NE(log.find("api-audit\\x0aFORGED path \\x1b[31m-"), std::string::npos) << log;
  EXPECT_NE(log.find("admin: oncall set the override of per-user for "
                     "header:x-user=bob\\\\x0d\\\\x0aroot: limit 5"),
            std::string::npos)
      << log;
}

// Item 8: /top escapes the backslash, so the text an operator copies from it is that
// caller's: the value `\x41-literal` is not the caller `A-literal`.
// Item 9: an override's limit is bounded as a config's (2^50), and at the bound the client
// still sees an exact, non-negative remaining count.
TEST(AdminApi, TheCallerTopShowsIsTheOneAnOverrideHitsAndOverrideLimitsAreBounded) {
  Origin origin;
  const auto port = free_port(), admin = free_port();
  Instance fg("api-top-text", port, admin, user_yaml(port, admin, origin));
  EXPECT_EQ(user_status(port, "\\x41-literal"), 200);
  const auto top_answer = curl("", fg.url("/top"));
  const auto top = boost::json::parse(top_answer.substr(0, top_answer.rfind(' ')));
  std::string caller;
  for (const auto& l : top.at("limits").as_array())
    for (const auto& t : l.at("top").as_array()) caller = t.at("caller").as_string().c_str();
  EXPECT_EQ(caller, "header:x-user=\\x5cx41-literal");
  auto put = curl(kAuth + "-X PUT -d '{\"exempt\": true}' ",
                  fg.url("/overrides/per-user/" + percent_encoded(caller)));
  ASSERT_EQ(status_of(put), 200) << put;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(user_status(port, "\\x41-literal"), 200) << i;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(user_status(port, "A-literal"), 200) << i;
  EXPECT_EQ(user_status(port, "A-literal"), 429);  // not the exempted caller

  auto huge = curl(kAuth + "-X PUT -d '{\"limit\": 9223372036854775807}' ",
                   fg.url("/overrides/per-user/header:x-user=big"));
  EXPECT_EQ(status_of(huge), 400) << huge;
  EXPECT_NE(huge.find("from 1 to 1125899906842624"), std::string::npos) << huge;
  EXPECT_EQ(status_of(curl(kAuth + "-X PUT -d '{\"limit\": 1125899906842624}' ",
                           fg.url("/overrides/per-user/header:x-user=big"))),
            200);
  auto r = get(port, "/x", "X-User: big\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_EQ((*r)["X-RateLimit-Remaining"], "1125899906842623");
}

}  // namespace
}  // namespace floodgate::testing
