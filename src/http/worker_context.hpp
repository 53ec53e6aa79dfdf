#pragma once
// What one worker's sessions share. Everything here belongs to a single event loop thread,
// except the config source (atomic), the logger and the clock (thread-safe).

#include <spdlog/logger.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "floodgate/admin/metrics.hpp"
#include "floodgate/config/config_source.hpp"
#include "floodgate/limit/clock.hpp"
#include "limit_gate.hpp"
#include "session_registry.hpp"
#include "upstream_h2.hpp"
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
  LimitGate gate;
  admin::Metrics& metrics;
  spdlog::logger* access_log = nullptr;
  H2UpstreamPool h2_pool{pool};  // connections to `protocol: h2` upstreams
  // The snapshot a new request is served under (SnapshotCache: no lock per request).
  config::SnapshotCache snapshots{config};
  config::ConfigPtr snapshot() { return snapshots.get(); }
  // Per-worker lookups of the shared metric cells (the registry's lock is taken once per name).
  std::unordered_map<std::string, admin::UpstreamMetrics*> upstream_metrics;
  admin::UpstreamMetrics& upstream_stats(const std::string& name) {
    auto& slot = upstream_metrics[name];
    if (!slot) slot = &metrics.upstream(name);
    return *slot;
  }
  LogThrottle upstream_errors;
  // `u` answered with `status` `took` after the request was sent: its latency and status class.
  void upstream_answered(const config::Upstream& u, std::chrono::steady_clock::duration took,
                         int status) {
    auto& stats = upstream_stats(u.name);
    stats.latency.observe(std::chrono::duration<double>(took).count());
    stats.by_class[std::min(5, std::max(0, status / 100))].fetch_add(1, std::memory_order_relaxed);
  }
  // A connection to `u` could not be made: counted (a timeout apart) and logged, at most a
  // line a second.
  void upstream_connect_failed(const config::Upstream& u, bool timeout, std::string_view why) {
    auto& stats = upstream_stats(u.name);
    (timeout ? stats.timeouts : stats.connect_errors).fetch_add(1, std::memory_order_relaxed);
    if (auto quiet = upstream_errors.allow(); quiet >= 0)
      log.warn("upstream {} ({}): connect failed: {} ({} similar lines suppressed)", u.name, u.url,
               why, quiet);
  }
  // Every session's coroutine ends before the worker stops its loop (Worker::drain), so no
  // session frame outlives this context.
  SessionRegistry sessions;
  std::uint64_t in_flight = 0;  // requests between header read and response end
  bool draining = false;        // set once: finish the current request, then close
};

}  // namespace floodgate::http
