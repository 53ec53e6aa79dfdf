#pragma once
// What the tests of the real binary share: its YAML in a temp file (rewritten before a
// SIGHUP), waiting for it to serve, a Redis-backed config, and reading /metrics. The binary
// itself runs in a ChildProcess (harness.hpp): signals, SIGKILL and the admin listener wired
// to the store's health are what only a process shows.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "harness.hpp"

namespace floodgate::testing {

// The binary a real-binary test runs: $FLOODGATE_TEST_BINARY when set (to show that a test
// fails on an older build, e.g. one of the commit before a fix), else the one this build made.
std::string floodgate_binary();

// Writes `text` to a file in the temp directory named after `name` and this process; returns
// its path. Writing again to the same name replaces the file in place (a reload's new config).
std::string write_temp_file(const std::string& name, const std::string& text);

// The real binary serving `config_path`, its log (stderr) and access log (stdout) on the one
// pipe ChildProcess reads. `exec` keeps the pid, so signals reach floodgate itself.
std::unique_ptr<ChildProcess> start_floodgate(const std::string& config_path);

// Reads `p`'s lines until one contains `needle` and returns it ("" if none came in time).
// Every line read on the way is appended to `seen`, for failure messages.
std::string wait_for_line(ChildProcess& p, const std::string& needle,
                          std::chrono::milliseconds timeout, std::string& seen);

// Until `port` answers a GET of `target` (whatever the status): a test failure after 5 s.
void wait_serving(std::uint16_t port, const std::string& target = "/__up");
// Until `port` accepts a connection (no request is sent): a test failure after 5 s.
void wait_listening(std::uint16_t port);

// The next local midnight in `zone` (Unix seconds), by the system's own zone database through
// date(1): an oracle apart from src/calendar. When it is less than `margin` away it first waits
// until it has passed (a day must not end under the test) and returns the one after.
std::int64_t next_local_midnight(const std::string& zone,
                                 std::chrono::seconds margin = std::chrono::seconds(30));

// Polls `condition` every few milliseconds until it holds or `timeout` has passed; returns
// its last value. For conditions a loaded machine reaches at its own pace.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// The value of one series of a Prometheus text, its name and labels spelled as rendered
// (`floodgate_requests_total{route="api",outcome="limited"}`); UINT64_MAX when absent.
std::uint64_t metric(const std::string& text, const std::string& series);

// The admin API with the test token: `admin: {listen, tokens}` YAML for `redis_config`'s
// `extra`, and an exemption of `caller` from `limit` for 10 minutes PUT through it ("STATUS
// BODY" of curl's answer).
std::string admin_with_test_token(std::uint16_t admin);
std::string put_exemption(std::uint16_t admin, const std::string& limit, const std::string& caller);
// Any override (`body`: `{"limit": 5}`, `{"exempt": true, "ttl": "1m"}`), the same way.
std::string put_override(std::uint16_t admin, const std::string& limit, const std::string& caller,
                         const std::string& body);

// A proxy on 127.0.0.1:`listen_port` (0: any) with 2 workers and a 1 s drain, in front of the
// origin on `origin_port`, deciding in the Redis on `redis_port` within `timeout`, as one of
// 2 instances. `extra`: more top-level YAML (`admin:`, `log:`) put before `routes:`.
std::string redis_config(std::uint16_t listen_port, std::uint16_t origin_port,
                         std::uint16_t redis_port, const std::string& routes,
                         const std::string& timeout = "50ms", const std::string& extra = "");

// A fail_open and a fail_closed route, 3 requests each an hour.
inline const std::string kOpenAndClosedRoutes = R"(
  - name: open
    match: { path_prefix: /open }
    upstream: origin
    on_store_error: fail_open
    limits: [{ name: l, algorithm: token_bucket, capacity: 3, refill_rate: 1/h, key: [route] }]
  - name: closed
    match: { path_prefix: /closed }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: token_bucket, capacity: 3, refill_rate: 1/h, key: [route] }]
)";

// A route with a limit nobody reaches, deciding in the store or answering 503: 200 means the
// store decided.
inline const std::string kProbeRoute = R"(
  - name: probe
    match: { path_prefix: /probe }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: token_bucket, capacity: 1000000, refill_rate: 1/h, key: [route] }]
)";

// Until the store decides on every worker (each has its own connection, or slot map): 16
// decisions in a row on `target` (a kProbeRoute), over new connections that the kernel
// spreads across the workers. A test failure after about 10 s.
void wait_enforced(std::uint16_t port, const std::string& target = "/probe");

}  // namespace floodgate::testing
