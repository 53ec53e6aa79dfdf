#include "health_checks.hpp"

#include <nghttp2/nghttp2.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include <algorithm>
#include <string>

#include "h2/h2_header_block.hpp"
#include "net/coro_names.hpp"
#include "net/report_exception.hpp"

namespace floodgate::http {

using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

// How often the checker looks for checks that are due.
constexpr auto kTick = 100ms;

struct Counted {
  explicit Counted(int& n) : n(n) { ++n; }
  ~Counted() { --n; }
  int& n;
};

struct Verdict {
  bool pass = false;
  std::string why;  // a failure's reason, for the log
};

Verdict of_status(int status) {
  if (status >= 200 && status < 400) return {true, {}};
  return {false, "status " + std::to_string(status)};
}

std::string authority(const config::UpstreamServer& s) {
  const bool v6 = s.host.find(':') != std::string::npos;
  return (v6 ? "[" + s.host + "]" : s.host) + ":" + std::to_string(s.port);
}

std::chrono::milliseconds left(steady::time_point deadline) {
  return std::max(1ms,
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()));
}

// GET path on a new HTTP/1.1 connection, closed after the response head.
asio::awaitable<Verdict> check_http1(HealthChecks& w, config::UpstreamServer s,
                                     const config::HealthCheck& hc) {
  const auto deadline = steady::now() + hc.timeout;
  s.connect_timeout = std::min(s.connect_timeout, hc.timeout);
  UpstreamPool::Connected c;
  {
    Watchdog connecting(w.upstreams.pool.executor());
    c = co_await w.upstreams.pool.connect(s, connecting);
  }
  if (c.error) co_return Verdict{false, "connect: " + c.why};
  auto& conn = *c.conn;
  const std::string request = "GET " + hc.path + " HTTP/1.1\r\nHost: " + authority(s) +
                              "\r\nUser-Agent: floodgate-health-check\r\nConnection: close\r\n\r\n";
  conn.watch.guard(conn.stream.socket(), left(deadline));
  auto [wec, wn] =
      co_await asio::async_write(conn.stream, asio::buffer(request), as_tuple(use_awaitable));
  if (auto ec = conn.watch.translate(wec)) co_return Verdict{false, ec.message()};
  bhttp::response_parser<bhttp::empty_body> parser;
  parser.header_limit(64 * 1024);
  conn.watch.guard(conn.stream.socket(), left(deadline));
  auto [rec, rn] =
      co_await bhttp::async_read_header(conn.stream, conn.buffer, parser, as_tuple(use_awaitable));
  conn.watch.relax();
  if (auto ec = conn.watch.translate(rec)) co_return Verdict{false, ec.message()};
  co_return of_status(parser.get().result_int());
}

// GET path as a stream of a pooled HTTP/2 connection (one is opened when none is there).
asio::awaitable<Verdict> check_h2(HealthChecks& w, config::UpstreamServer s,
                                  const config::HealthCheck& hc) {
  const auto deadline = steady::now() + hc.timeout;
  s.connect_timeout = std::min(s.connect_timeout, hc.timeout);
  auto got = co_await w.h2.get(s);
  if (!got.conn) co_return Verdict{false, "connect: " + got.why};
  H2HeaderBlock block;
  block.add(":method", "GET");
  block.add(":scheme", s.tls ? "https" : "http");
  block.add(":authority", authority(s));
  block.add(":path", hc.path);
  block.add("user-agent", "floodgate-health-check");
  asio::steady_timer wake(w.upstreams.pool.executor());
  auto call = std::make_shared<H2Call>();
  call->waker = &wake;
  H2CallGuard guard{call, got.conn};  // the stream is reset once the head is in
  if (!got.conn->submit(call, block.pairs(), false))
    co_return Verdict{false, "the connection took no new stream"};
  while (!call->head_done && !call->closed) {
    if (steady::now() >= deadline) co_return Verdict{false, "timed out"};
    wake.expires_after(left(deadline));
    co_await wake.async_wait(as_tuple(use_awaitable));  // or cancelled: the call changed
  }
  if (!call->head_done) co_return Verdict{false, nghttp2_http2_strerror(call->error)};
  co_return of_status(call->status);
}

// One check of one server, and what its result changes.
// `config` is held for `up` and `s`, which are its.
asio::awaitable<void> check(HealthChecks& w, [[maybe_unused]] config::ConfigPtr config,
                            const config::Upstream& up, const config::UpstreamServer& s,
                            ServerHealth& h) {
  Counted counted(w.running);
  struct Done {
    ServerHealth& h;
    ~Done() { h.checking = false; }
  } done{h};
  const auto& hc = *up.health_check;
  Verdict v;
  if (s.protocol == config::UpstreamProtocol::h2)
    v = co_await check_h2(w, s, hc);
  else
    v = co_await check_http1(w, s, hc);
  if (v.pass) {
    h.misses = 0;
    if (++h.passes >= hc.healthy && !h.checked_up.load(std::memory_order_relaxed)) {
      h.checked_up.store(true, std::memory_order_relaxed);
      // Back by its checks: an ejection from before it went down is over too (as Envoy's
      // successful_active_health_check_uneject_host).
      h.ejected_until.store(0, std::memory_order_relaxed);
      w.services.log.info(
          "upstream {}: server {} passed {} health checks in a row: back in service", up.name,
          s.url, h.passes);
    }
    co_return;
  }
  h.checks_failed.fetch_add(1, std::memory_order_relaxed);
  h.passes = 0;
  if (++h.misses >= hc.unhealthy && h.checked_up.load(std::memory_order_relaxed)) {
    h.checked_up.store(false, std::memory_order_relaxed);
    w.services.log.warn(
        "upstream {}: server {} failed {} health checks in a row (GET {}: {}): out of service",
        up.name, s.url, h.misses, hc.path, v.why);
  }
}

}  // namespace

asio::awaitable<void> run_health_checks(HealthChecks& w) {
  Counted counted(w.running);
  asio::steady_timer tick(w.upstreams.pool.executor());
  while (!w.services.draining) {
    auto config = w.services.snapshot();
    const auto now = steady::now();
    for (const auto& up : config->upstreams) {
      for (const auto& s : up.servers) {
        auto& h = w.upstreams.balancer.health().of(s);
        if (!up.health_check) {
          // Checks taken off by a reload: their last verdict no longer holds.
          h.checked_up.store(true, std::memory_order_relaxed);
          h.passes = h.misses = 0;
          continue;
        }
        // A reload that shortened the interval applies at once.
        h.next_check = std::min(h.next_check, now + up.health_check->interval);
        if (h.checking || now < h.next_check) continue;
        h.checking = true;
        h.next_check = now + up.health_check->interval;
        asio::co_spawn(w.upstreams.pool.executor(), check(w, config, up, s, h),
                       log_exceptions(w.services.log, w.services.metrics, "health check"));
      }
    }
    tick.expires_after(kTick);
    co_await tick.async_wait(as_tuple(use_awaitable));
  }
}

}  // namespace floodgate::http
