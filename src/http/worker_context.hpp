#pragma once
// What one worker's sessions share. Everything here belongs to a single event loop thread,
// except the config source (atomic), the logger and the clock (thread-safe).

#include <spdlog/logger.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "floodgate/config/config_source.hpp"
#include "floodgate/decide/gate.hpp"
#include "floodgate/keys/jwks.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "request_id.hpp"
#include "session_registry.hpp"
#include "upstream_h2.hpp"
#include "upstream_health.hpp"
#include "upstream_pool.hpp"

namespace floodgate::http {

// At most one line per second for a repeated error (an outage must not become a log flood);
// the lines in between are counted and reported with the next one.
class LogThrottle {
 public:
  // Returns how many were suppressed since the last allowed line, or -1 to stay quiet.
  std::int64_t allow() {
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(1)) {
      ++suppressed_;
      return -1;
    }
    last_ = now;
    auto n = suppressed_;
    suppressed_ = 0;
    return static_cast<std::int64_t>(n);
  }

 private:
  std::chrono::steady_clock::time_point last_{};
  std::uint64_t suppressed_ = 0;
};

struct WorkerContext {
  config::ConfigSource& config;
  spdlog::logger& log;
  const limit::Clock& clock;
  UpstreamPool pool;
  decide::Gate gate;  // decides on the worker's stores (owned by the worker)
  metrics::Metrics& metrics;
  UpstreamBalancer balancer;  // which server of an upstream a request goes to
  RequestIds request_ids;     // X-Request-Id and trace ids
  spdlog::logger* access_log = nullptr;
  keys::JwksCell* jwks = nullptr;  // the issuer's keys, when jwt.jwks is fetched (ServerDeps)
  H2UpstreamPool h2_pool{pool};    // connections to `protocol: h2` upstreams
  // The snapshot a new request is served under (SnapshotCache: no lock per request).
  config::SnapshotCache snapshots{config};
  config::ConfigPtr snapshot() { return snapshots.get(); }
  // Per-worker lookups of the shared metric cells (the registry's lock is taken once per name).
  std::unordered_map<std::string, metrics::UpstreamMetrics*> upstream_metrics;
  metrics::UpstreamMetrics& upstream_stats(const std::string& name) {
    auto& slot = upstream_metrics[name];
    if (!slot) slot = &metrics.upstream(name);
    return *slot;
  }
  LogThrottle upstream_errors;
  // The server for a request to `up`: the one it is sent to, counted in flight until the
  // ServerUse ends.
  ServerUse upstream_server(const config::ConfigPtr& c, const config::Upstream& up) {
    return balancer.pick(c, up);
  }
  // Another server for a request whose connection to `use`'s could not be made (nothing of
  // it was sent, so it cannot have been processed): true with `use` holding the new one.
  // Once per request, as a retry budget of one.
  bool upstream_retry(const config::ConfigPtr& c, ServerUse& use) {
    auto next = balancer.pick(c, use.upstream(), &use.server());
    if (!next) return false;
    upstream_stats(use.server().name).retries.fetch_add(1, std::memory_order_relaxed);
    use = std::move(next);
    return true;
  }
  // `use`'s server answered with `status` `took` after the request was sent: its latency and
  // status class; a 5xx counts toward its ejection.
  void upstream_answered(ServerUse& use, std::chrono::steady_clock::duration took, int status) {
    auto& stats = upstream_stats(use.server().name);
    stats.latency.observe(std::chrono::duration<double>(took).count());
    stats.by_class[std::min(5, std::max(0, status / 100))].fetch_add(1, std::memory_order_relaxed);
    upstream_outcome(use, status >= 500);
  }
  // A connection to `use`'s server could not be made: counted (a timeout apart) and logged,
  // at most a line a second.
  void upstream_connect_failed(ServerUse& use, bool timeout, std::string_view why) {
    const auto& u = use.server();
    auto& stats = upstream_stats(u.name);
    (timeout ? stats.timeouts : stats.connect_errors).fetch_add(1, std::memory_order_relaxed);
    if (auto quiet = upstream_errors.allow(); quiet >= 0)
      log.warn("upstream {} ({}): connect failed: {} ({} similar lines suppressed)", u.name, u.url,
               why, quiet);
    upstream_outcome(use, true);
  }
  // The response did not come in time.
  void upstream_timed_out(ServerUse& use) {
    upstream_stats(use.server().name).timeouts.fetch_add(1, std::memory_order_relaxed);
    upstream_outcome(use, true);
  }
  // A request's end on its server, toward (or ending) a run of failures that ejects it.
  // An upstream of one server is never ejected (as nginx ignores max_fails there): there is
  // nowhere else to send its requests.
  void upstream_outcome(ServerUse& use, bool failed) {
    static constexpr config::Ejection kNever{0, config::Duration(0)};
    if (!use.first_outcome()) return;
    const auto& e = use.upstream().servers.size() > 1 ? use.upstream().ejection : kNever;
    if (balancer.health().record(use.health(), e, failed, std::chrono::steady_clock::now()))
      log.warn("upstream {}: server {} ejected for {} after {} failures in a row",
               use.server().name, use.server().url, config::format_duration(e.cool_down),
               e.consecutive_failures);
  }
  // Every session's coroutine ends before the worker stops its loop (Worker::drain), so no
  // session frame outlives this context.
  SessionRegistry sessions;
  std::uint64_t in_flight = 0;  // requests between header read and response end
  bool draining = false;        // set once: finish the current request, then close
  int health_checks = 0;        // the active checks' coroutines running (the drain waits)
};

// A coroutine of the worker's that throws (it should not) is reported and counted; the
// worker goes on.
inline void report_exception(spdlog::logger& log, metrics::Metrics& metrics, const char* what,
                             std::exception_ptr e) {
  metrics.unexpected_exceptions.fetch_add(1, std::memory_order_relaxed);
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    log.error("{}: unexpected exception: {}", what, ex.what());
  } catch (...) {
    log.error("{}: unexpected exception (not a std::exception)", what);
  }
}

// The completion handler of co_spawn for them.
inline auto log_exceptions(WorkerContext& ctx, const char* what) {
  return [&ctx, what](std::exception_ptr e) {
    if (e) report_exception(ctx.log, ctx.metrics, what, e);
  };
}

}  // namespace floodgate::http
