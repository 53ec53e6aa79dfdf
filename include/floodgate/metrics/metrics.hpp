#pragma once
// Counters the data plane bumps; admin/ renders them (/metrics, in the Prometheus text format:
// admin/prometheus.hpp) and reads nothing else of the workers. Layer metrics/: below everything
// but uri and base, so any component may own counters here.
// Workers write with relaxed atomic increments (no locks on the request path); the admin
// thread reads. Label values are bounded: route, upstream and limit names from the config,
// outcomes and kinds from fixed lists; never a client identifier.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::metrics {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds_seconds);
  void observe(double seconds);
  const std::vector<double>& bounds() const { return bounds_; }
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum_seconds() const { return static_cast<double>(sum_micros_.load()) / 1e6; }
  // Observations per bucket (not cumulative), the last one above every bound.
  std::vector<std::uint64_t> buckets() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // one per bound, plus +Inf
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_micros_{0};
};

enum class Outcome : std::size_t {
  admitted,
  limited,
  shadow_limited,
  store_error_open,
  store_error_closed,
  local,
  rejected,   // 400 / 401 before any limit was decided
  denied,     // 403: on a deny list
  allowed,    // on an allow list: forwarded without the limits
  unlimited,  // no limit applied: the route has none, or each skipped the request
  kCount
};
const char* to_string(Outcome o);

// The statuses floodgate answers itself (not an origin's), counted by route.
inline constexpr std::array<int, 12> kOwnStatuses = {400, 401, 403, 404, 408, 413,
                                                     429, 431, 500, 502, 503, 504};
using OwnStatusCounts = std::array<std::atomic<std::uint64_t>, kOwnStatuses.size() + 1>;  // + other
void count_own_status(OwnStatusCounts& counts, int status);

struct RouteMetrics {
  // One outcome per request: they add up to the route's requests.
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Outcome::kCount)> outcomes{};
  std::atomic<std::uint64_t> deny_cache_hits{0};
  OwnStatusCounts own_statuses{};
  void count(Outcome o) {
    outcomes[static_cast<std::size_t>(o)].fetch_add(1, std::memory_order_relaxed);
  }
};

// A leased limit's counters (store/leased_store.hpp bumps them, on any worker).
struct LeaseCounters {
  std::atomic<std::uint64_t> leases{0};    // grants taken from the store
  std::atomic<std::uint64_t> granted{0};   // units those grants took
  std::atomic<std::uint64_t> returned{0};  // unused units given back to the store
  std::atomic<std::uint64_t> local{0};     // requests decided from units in hand
};

// A limit's refusals: enforced (the request got 429) or in shadow (it would have).
struct LimitCounters {
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> shadow_refused{0};
};

struct UpstreamMetrics {
  std::array<std::atomic<std::uint64_t>, 6> by_class{};  // index 1..5 = 1xx..5xx
  std::atomic<std::uint64_t> connect_errors{0};
  std::atomic<std::uint64_t> timeouts{0};
  std::atomic<std::uint64_t> retries{0};  // requests sent again to another server
  // Requests sent again to the same server on another connection: a reused keep-alive
  // connection found closed, or an h2 stream the origin refused unprocessed.
  std::atomic<std::uint64_t> resent{0};
  Histogram latency;  // request sent -> response header
  UpstreamMetrics();
};

// One upstream server's counters and state, read from the server's health board (http/).
struct UpstreamServerSample {
  std::string upstream;
  std::string server;  // its url
  std::uint64_t requests = 0;
  std::uint64_t failures = 0;  // connect failures, timeouts, 5xx
  std::uint64_t ejections = 0;
  std::uint64_t checks_failed = 0;
  bool up = true;  // neither failing its checks nor ejected
};

class Metrics {
 public:
  Metrics(std::string version, std::string pop);

  // Stable references, created on first use (the only lock, taken once per name per worker).
  RouteMetrics& route(std::string_view name);
  UpstreamMetrics& upstream(std::string_view name);
  LeaseCounters& lease(std::string_view route, std::string_view limit);
  LimitCounters& limit(std::string_view route, std::string_view limit);
  // floodgate's own answers to requests no route took (400s of a bad head, 404s).
  OwnStatusCounts unrouted_statuses{};

  Histogram decision_memory;  // seconds per store decision, by backend
  Histogram decision_redis;
  std::array<std::atomic<std::uint64_t>, 3> store_errors{};  // timeout, unavailable, protocol
  std::atomic<std::int64_t> active_connections{0};
  std::atomic<std::int64_t> active_tunnels{0};  // WebSocket connections being relayed
  std::atomic<std::uint64_t> tls_handshake_failures{0};
  // on_exceed: delay: requests held, and the places among the held taken now (by requests
  // held, or being decided with a place to be held; server.max_delayed bounds it).
  std::atomic<std::uint64_t> delayed_total{0};
  std::atomic<std::int64_t> delayed_now{0};
  // jwt.jwks (app/jwks_refresher.cpp): fetches by result, the keys in use and when they came.
  std::atomic<std::uint64_t> jwks_fetches_ok{0};
  std::atomic<std::uint64_t> jwks_fetches_failed{0};
  std::atomic<std::int64_t> jwks_keys{0};
  std::atomic<std::int64_t> jwks_updated_seconds{0};  // Unix time of the set in use; 0: none
  std::atomic<std::uint64_t> reloads_ok{0};
  std::atomic<std::uint64_t> reloads_failed{0};
  // config_source (app/config_feed.cpp): each fetch's outcome (indexed by ConfigUpdate).
  enum class ConfigUpdate : std::size_t {
    applied,
    unchanged,
    bad_signature,
    stale_version,
    invalid,
    fetch_error,
    kCount
  };
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(ConfigUpdate::kCount)>
      config_updates{};
  void count(ConfigUpdate u) {
    config_updates[static_cast<std::size_t>(u)].fetch_add(1, std::memory_order_relaxed);
  }
  // Unix time the config in force was applied (at start, a reload, a fetched one).
  std::atomic<std::int64_t> config_applied_seconds{0};
  // Filled by app/: the config in force's `version:` (empty: none) and SHA-256.
  std::function<std::pair<std::string, std::string>()> config_identity;
  // Filled by app/: the embedded store's evictions, counted by the store itself (read when
  // rendering, so there is one count and nothing to keep in step).
  std::function<std::uint64_t()> memory_evictions;
  // Times an accept loop paused: at server.max_connections, and when accept() failed for
  // lack of descriptors or memory (indexed by AcceptPause).
  enum class AcceptPause : std::size_t { max_connections, resources, kCount };
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(AcceptPause::kCount)>
      accept_pauses{};
  void count(AcceptPause p) {
    accept_pauses[static_cast<std::size_t>(p)].fetch_add(1, std::memory_order_relaxed);
  }
  std::atomic<std::uint64_t> unexpected_exceptions{0};  // caught at a worker's boundary
  // Requests by the protocol the client spoke (the access log's `protocol`), however they
  // ended: HTTP/1.x, HTTP/2, HTTP/3, Envoy's RLS calls.
  static constexpr std::array<std::string_view, 4> kProtocols{"http1", "h2", "h3", "rls"};
  std::array<std::atomic<std::uint64_t>, kProtocols.size()> protocol_requests{};
  void count_protocol(std::string_view protocol) {
    for (std::size_t i = 0; i < kProtocols.size(); ++i)
      if (kProtocols[i] == protocol) {
        protocol_requests[i].fetch_add(1, std::memory_order_relaxed);
        return;
      }
  }
  // HTTP/2 client connections ended for a flood (GOAWAY ENHANCE_YOUR_CALM: resets past
  // server.http2.max_resets_per_second, empty frames), and streams reset because the client
  // took none of their response (or sent none of their body) for timeouts.idle.
  std::atomic<std::uint64_t> http2_flood_goaways{0};
  std::atomic<std::uint64_t> http2_stalled_streams{0};
  // HTTP/3: Retry packets sent (a new connection asked to prove its address while many
  // handshakes were under way), Initials whose Retry token failed, handshakes that timed out
  // (timeouts.header_read), and streams reset for a stall as HTTP/2's.
  std::atomic<std::uint64_t> http3_retries_sent{0};
  std::atomic<std::uint64_t> http3_retries_failed{0};
  std::atomic<std::uint64_t> http3_handshake_timeouts{0};
  std::atomic<std::uint64_t> http3_stalled_streams{0};
  std::atomic<std::uint64_t> http3_flood_closes{0};  // H3_EXCESSIVE_LOAD: resets past the budget
  // The admin API's changes (indexed by AdminChange), and its requests refused a token.
  enum class AdminChange : std::size_t { key_reset, override_set, override_removed, kCount };
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(AdminChange::kCount)>
      admin_changes{};
  void count(AdminChange c) {
    admin_changes[static_cast<std::size_t>(c)].fetch_add(1, std::memory_order_relaxed);
  }
  std::atomic<std::uint64_t> admin_unauthorized{0};
  // Filled by app/: how many workers' store connections are healthy, and how many there are.
  std::function<std::pair<int, int>()> store_health;
  // Filled by app/: every upstream server's counters and state.
  std::function<std::vector<UpstreamServerSample>()> upstream_servers;
  std::string backend = "memory";

  // The tables of counters created on first use, read under their lock (for rendering).
  struct Tables {
    const std::map<std::string, std::unique_ptr<RouteMetrics>, std::less<>>& routes;
    const std::map<std::string, std::unique_ptr<UpstreamMetrics>, std::less<>>& upstreams;
    const std::map<std::pair<std::string, std::string>, std::unique_ptr<LeaseCounters>>& leases;
    const std::map<std::pair<std::string, std::string>, std::unique_ptr<LimitCounters>>& limits;
  };
  template <typename F>
  void with_tables(F&& f) const {
    std::lock_guard lock(mutex_);
    f(Tables{routes_, upstreams_, leases_, limits_});
  }

  // Each route's outcome counters, deny cache hits last, by route name.
  using RouteCounts = std::array<std::uint64_t, static_cast<std::size_t>(Outcome::kCount) + 1>;
  std::map<std::string, RouteCounts, std::less<>> route_counts() const;
  const std::string& version() const { return version_; }
  const std::string& pop() const { return pop_; }

 private:
  std::string version_;
  std::string pop_;
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<RouteMetrics>, std::less<>> routes_;
  std::map<std::string, std::unique_ptr<UpstreamMetrics>, std::less<>> upstreams_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<LeaseCounters>> leases_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<LimitCounters>> limits_;
};

}  // namespace floodgate::metrics
