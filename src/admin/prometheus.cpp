#include "floodgate/admin/metrics.hpp"

#include <charconv>
#include <cstdio>

#include "process_stats.hpp"

namespace floodgate::admin {

namespace {

const std::vector<double>& latency_bounds() {
  static const std::vector<double> b = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                        0.05,   0.1,     0.25,   0.5,   1,      2.5,   10};
  return b;
}

// The shortest text that reads back as `v`: 0.0001, not 0.00010000000000000001.
std::string num(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, ec == std::errc() ? end : buf);
}

void line(std::string& out, std::string_view name, std::string_view labels, std::uint64_t v) {
  out += name;
  if (!labels.empty()) out.append("{").append(labels).append("}");
  out += ' ';
  out += std::to_string(v);
  out += '\n';
}

void help(std::string& out, const char* name, const char* type, const char* text) {
  out.append("# HELP ").append(name).append(" ").append(text).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

// Label values come from config names (letters, digits, - _ .): nothing to escape but quotes.
std::string label(std::string_view key, std::string_view value) {
  std::string out(key);
  out += "=\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace

const char* to_string(Outcome o) {
  switch (o) {
    case Outcome::admitted:
      return "admitted";
    case Outcome::limited:
      return "limited";
    case Outcome::shadow_limited:
      return "shadow_limited";
    case Outcome::store_error_open:
      return "store_error_open";
    case Outcome::store_error_closed:
      return "store_error_closed";
    case Outcome::local:
      return "local";
    case Outcome::rejected:
      return "rejected";
    case Outcome::denied:
      return "denied";
    case Outcome::allowed:
      return "allowed";
    case Outcome::unlimited:
      return "unlimited";
    case Outcome::kCount:
      break;
  }
  return "?";
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<std::uint64_t>[bounds_.size() + 1]) {
  for (std::size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::observe(double seconds) {
  std::size_t i = 0;
  while (i < bounds_.size() && seconds > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

void Histogram::render(std::string& out, std::string_view name, std::string_view labels) const {
  std::uint64_t cumulative = 0;
  std::string prefix(labels);
  if (!prefix.empty()) prefix += ',';
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    std::string le = i < bounds_.size() ? num(bounds_[i]) : "+Inf";
    line(out, std::string(name) + "_bucket", prefix + "le=\"" + le + "\"", cumulative);
  }
  out.append(name).append("_sum");
  if (!labels.empty()) out.append("{").append(labels).append("}");
  out.append(" ").append(num(static_cast<double>(sum_micros_.load()) / 1e6)).append("\n");
  line(out, std::string(name) + "_count", labels, count_.load(std::memory_order_relaxed));
}

std::vector<std::uint64_t> Histogram::buckets() const {
  std::vector<std::uint64_t> out(bounds_.size() + 1);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = buckets_[i].load(std::memory_order_relaxed);
  return out;
}

UpstreamMetrics::UpstreamMetrics() : latency(latency_bounds()) {}

Metrics::Metrics(std::string version, std::string pop)
    : decision_memory(latency_bounds()),
      decision_redis(latency_bounds()),
      version_(std::move(version)),
      pop_(std::move(pop)) {}

void count_own_status(OwnStatusCounts& counts, int status) {
  std::size_t i = 0;
  while (i < kOwnStatuses.size() && kOwnStatuses[i] != status) ++i;
  counts[i].fetch_add(1, std::memory_order_relaxed);
}

LimitCounters& Metrics::limit(std::string_view route, std::string_view limit) {
  std::lock_guard lock(mutex_);
  auto& cell = limits_[{std::string(route), std::string(limit)}];
  if (!cell) cell = std::make_unique<LimitCounters>();
  return *cell;
}

LeaseCounters& Metrics::lease(std::string_view route, std::string_view limit) {
  std::lock_guard lock(mutex_);
  auto& cell = leases_[{std::string(route), std::string(limit)}];
  if (!cell) cell = std::make_unique<LeaseCounters>();
  return *cell;
}

RouteMetrics& Metrics::route(std::string_view name) {
  std::lock_guard lock(mutex_);
  auto it = routes_.find(name);
  if (it == routes_.end())
    it = routes_.emplace(std::string(name), std::make_unique<RouteMetrics>()).first;
  return *it->second;
}

UpstreamMetrics& Metrics::upstream(std::string_view name) {
  std::lock_guard lock(mutex_);
  auto it = upstreams_.find(name);
  if (it == upstreams_.end())
    it = upstreams_.emplace(std::string(name), std::make_unique<UpstreamMetrics>()).first;
  return *it->second;
}

std::map<std::string, Metrics::RouteCounts, std::less<>> Metrics::route_counts() const {
  std::map<std::string, RouteCounts, std::less<>> out;
  std::lock_guard lock(mutex_);
  for (const auto& [name, r] : routes_) {
    auto& counts = out[name];
    for (std::size_t i = 0; i < r->outcomes.size(); ++i)
      counts[i] = r->outcomes[i].load(std::memory_order_relaxed);
    counts.back() = r->deny_cache_hits.load(std::memory_order_relaxed);
  }
  return out;
}

std::string Metrics::render() const {
  std::string out;
  out.reserve(8192);
  help(out, "floodgate_build_info", "gauge", "Version and PoP of this instance.");
  line(out, "floodgate_build_info", label("version", version_) + "," + label("pop", pop_), 1);

  if (auto p = read_process_stats()) {
    auto gauge = [&](const char* name, const char* type, const char* text, const std::string& v) {
      help(out, name, type, text);
      out.append(name).append(" ").append(v).append("\n");
    };
    gauge("process_cpu_seconds_total", "counter", "Total user and system CPU time in seconds.",
          num(p->cpu_seconds));
    gauge("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
          std::to_string(p->resident_bytes));
    gauge("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
          std::to_string(p->virtual_bytes));
    gauge("process_open_fds", "gauge", "Number of open file descriptors.",
          std::to_string(p->open_fds));
    gauge("process_max_fds", "gauge", "Maximum number of open file descriptors.",
          std::to_string(p->max_fds));
    gauge("process_start_time_seconds", "gauge",
          "Start time of the process since unix epoch in seconds.", num(p->start_time_seconds));
  }

  std::lock_guard lock(mutex_);
  help(out, "floodgate_requests_total", "counter", "Requests by route and limit decision.");
  for (const auto& [name, r] : routes_)
    for (std::size_t i = 0; i < r->outcomes.size(); ++i)
      line(out, "floodgate_requests_total",
           label("route", name) + "," + label("outcome", to_string(static_cast<Outcome>(i))),
           r->outcomes[i].load(std::memory_order_relaxed));
  help(out, "floodgate_limit_refusals_total", "counter",
       "Requests a limit refused (mode enforced: answered 429) or would have (shadow).");
  for (const auto& [names, c] : limits_) {
    const auto labels = label("route", names.first) + "," + label("limit", names.second);
    line(out, "floodgate_limit_refusals_total", labels + ",mode=\"enforced\"",
         c->refused.load(std::memory_order_relaxed));
    line(out, "floodgate_limit_refusals_total", labels + ",mode=\"shadow\"",
         c->shadow_refused.load(std::memory_order_relaxed));
  }
  help(out, "floodgate_own_responses_total", "counter",
       "Responses floodgate answered itself (not an origin's), by route and status; route \"\" "
       "for requests no route took.");
  auto own = [&](const std::string& route, const OwnStatusCounts& counts) {
    for (std::size_t i = 0; i < counts.size(); ++i)
      line(out, "floodgate_own_responses_total",
           label("route", route) + "," +
               label("status", i < kOwnStatuses.size() ? std::to_string(kOwnStatuses[i]) : "other"),
           counts[i].load(std::memory_order_relaxed));
  };
  own("", unrouted_statuses);
  for (const auto& [name, r] : routes_) own(name, r->own_statuses);
  help(out, "floodgate_deny_cache_hits_total", "counter",
       "Refusals answered from the local deny cache.");
  for (const auto& [name, r] : routes_)
    line(out, "floodgate_deny_cache_hits_total", label("route", name), r->deny_cache_hits.load());

  if (!leases_.empty()) {
    struct LeaseLine {
      const char* name;
      const char* help;
      std::atomic<std::uint64_t> LeaseCounters::*counter;
    };
    static constexpr LeaseLine lease_lines[] = {
        {"floodgate_lease_grants_total", "Leases taken from the store, by leased limit.",
         &LeaseCounters::leases},
        {"floodgate_lease_units_granted_total", "Units the leases took from the store.",
         &LeaseCounters::granted},
        {"floodgate_lease_units_returned_total", "Unused leased units given back to the store.",
         &LeaseCounters::returned},
        {"floodgate_lease_local_decisions_total", "Requests decided from leased units in hand.",
         &LeaseCounters::local}};
    for (const auto& l : lease_lines) {
      help(out, l.name, "counter", l.help);
      for (const auto& [names, c] : leases_)
        line(out, l.name, label("route", names.first) + "," + label("limit", names.second),
             ((*c).*l.counter).load(std::memory_order_relaxed));
    }
  }
  help(out, "floodgate_decision_seconds", "histogram", "Time for a store decision, by backend.");
  decision_memory.render(out, "floodgate_decision_seconds", label("backend", "memory"));
  decision_redis.render(out, "floodgate_decision_seconds", label("backend", "redis"));
  help(out, "floodgate_store_errors_total", "counter", "Store decisions that failed, by kind.");
  static constexpr const char* kinds[] = {"timeout", "unavailable", "protocol"};
  for (std::size_t i = 0; i < store_errors.size(); ++i)
    line(out, "floodgate_store_errors_total", label("kind", kinds[i]), store_errors[i].load());
  if (store_health) {
    auto [healthy, total] = store_health();
    help(out, "floodgate_store_healthy_connections", "gauge",
         "Workers whose store connection is up with its circuit breaker closed.");
    line(out, "floodgate_store_healthy_connections", label("backend", backend),
         static_cast<std::uint64_t>(healthy));
    help(out, "floodgate_store_circuit_open", "gauge",
         "Workers whose store circuit breaker is open or disconnected.");
    line(out, "floodgate_store_circuit_open", label("backend", backend),
         static_cast<std::uint64_t>(total - healthy));
  }
  help(out, "floodgate_memory_store_evictions_total", "counter",
       "Keys evicted from the embedded store at its cap.");
  line(out, "floodgate_memory_store_evictions_total", "",
       memory_evictions ? memory_evictions() : 0);

  help(out, "floodgate_upstream_responses_total", "counter", "Upstream responses by status class.");
  for (const auto& [name, u] : upstreams_)
    for (std::size_t c = 1; c <= 5; ++c)
      line(out, "floodgate_upstream_responses_total",
           label("upstream", name) + "," + label("class", std::to_string(c) + "xx"),
           u->by_class[c].load());
  help(out, "floodgate_upstream_errors_total", "counter",
       "Upstream failures: connect errors and timeouts.");
  for (const auto& [name, u] : upstreams_) {
    line(out, "floodgate_upstream_errors_total", label("upstream", name) + ",kind=\"connect\"",
         u->connect_errors.load());
    line(out, "floodgate_upstream_errors_total", label("upstream", name) + ",kind=\"timeout\"",
         u->timeouts.load());
  }
  help(out, "floodgate_upstream_retries_total", "counter",
       "Requests sent to another server after a connection to the first could not be made.");
  for (const auto& [name, u] : upstreams_)
    line(out, "floodgate_upstream_retries_total", label("upstream", name), u->retries.load());
  help(out, "floodgate_upstream_latency_seconds", "histogram",
       "Request sent to response header, by upstream.");
  for (const auto& [name, u] : upstreams_)
    u->latency.render(out, "floodgate_upstream_latency_seconds", label("upstream", name));

  if (upstream_servers) {
    auto servers = upstream_servers();
    struct ServerLine {
      const char* name;
      const char* type;
      const char* help;
      std::uint64_t UpstreamServerSample::*value;
    };
    static const ServerLine server_lines[] = {
        {"floodgate_upstream_server_requests_total", "counter",
         "Requests sent to each upstream server (each attempt).", &UpstreamServerSample::requests},
        {"floodgate_upstream_server_failures_total", "counter",
         "Requests that failed on each server: connect failures, timeouts and 5xx.",
         &UpstreamServerSample::failures},
        {"floodgate_upstream_server_ejections_total", "counter",
         "Times a server was ejected after consecutive failures.",
         &UpstreamServerSample::ejections},
        {"floodgate_upstream_server_checks_failed_total", "counter",
         "Active health checks a server failed.", &UpstreamServerSample::checks_failed}};
    for (const auto& l : server_lines) {
      help(out, l.name, l.type, l.help);
      for (const auto& s : servers)
        line(out, l.name, label("upstream", s.upstream) + "," + label("server", s.server),
             s.*l.value);
    }
    help(out, "floodgate_upstream_server_up", "gauge",
         "1 while a server is in service: passing its health checks and not ejected (when "
         "none of its upstream is, every one is sent requests).");
    for (const auto& s : servers)
      line(out, "floodgate_upstream_server_up",
           label("upstream", s.upstream) + "," + label("server", s.server), s.up ? 1 : 0);
  }

  help(out, "floodgate_active_connections", "gauge", "Open downstream connections.");
  line(out, "floodgate_active_connections", "",
       static_cast<std::uint64_t>(std::max<std::int64_t>(0, active_connections.load())));
  help(out, "floodgate_active_websockets", "gauge", "Open WebSocket tunnels.");
  line(out, "floodgate_active_websockets", "",
       static_cast<std::uint64_t>(std::max<std::int64_t>(0, active_tunnels.load())));
  help(out, "floodgate_accept_pauses_total", "counter",
       "Times accepting paused: at server.max_connections (new connections wait in the "
       "listen queue), or out of descriptors or memory.");
  line(out, "floodgate_accept_pauses_total", "reason=\"max_connections\"",
       accept_pauses[static_cast<std::size_t>(AcceptPause::max_connections)].load());
  line(out, "floodgate_accept_pauses_total", "reason=\"resources\"",
       accept_pauses[static_cast<std::size_t>(AcceptPause::resources)].load());
  help(out, "floodgate_tls_handshake_failures_total", "counter",
       "Downstream TLS handshakes that failed (protocol, version, timeout or closed).");
  line(out, "floodgate_tls_handshake_failures_total", "", tls_handshake_failures.load());
  help(out, "floodgate_delayed_requests_total", "counter",
       "Requests an on_exceed: delay limit held until their units had refilled.");
  line(out, "floodgate_delayed_requests_total", "", delayed_total.load());
  help(out, "floodgate_delayed_requests", "gauge",
       "Requests held by on_exceed: delay limits now, or being decided with a place to be "
       "held (at most server.max_delayed).");
  line(out, "floodgate_delayed_requests", "", delayed_now.load());
  help(out, "floodgate_jwks_fetches_total", "counter",
       "Fetches of jwt.jwks by result (a failed one keeps the last good key set).");
  line(out, "floodgate_jwks_fetches_total", "result=\"ok\"", jwks_fetches_ok.load());
  line(out, "floodgate_jwks_fetches_total", "result=\"error\"", jwks_fetches_failed.load());
  help(out, "floodgate_jwks_keys", "gauge", "Signature keys in the JWKS in use.");
  line(out, "floodgate_jwks_keys", "", jwks_keys.load());
  help(out, "floodgate_jwks_updated_timestamp_seconds", "gauge",
       "When the JWKS in use was fetched (Unix time; 0: none yet).");
  line(out, "floodgate_jwks_updated_timestamp_seconds", "", jwks_updated_seconds.load());
  help(out, "floodgate_unexpected_exceptions_total", "counter",
       "Exceptions caught at a worker's boundary (a bug: the log has each one).");
  line(out, "floodgate_unexpected_exceptions_total", "", unexpected_exceptions.load());
  help(out, "floodgate_http2_flood_goaways_total", "counter",
       "HTTP/2 connections ended with GOAWAY ENHANCE_YOUR_CALM (resets past "
       "max_resets_per_second, empty DATA frames).");
  line(out, "floodgate_http2_flood_goaways_total", "", http2_flood_goaways.load());
  help(out, "floodgate_http2_stalled_streams_total", "counter",
       "HTTP/2 streams reset because the client took none of the response for timeouts.idle.");
  line(out, "floodgate_http2_stalled_streams_total", "", http2_stalled_streams.load());
  help(out, "floodgate_admin_changes_total", "counter",
       "Changes made through the admin API, by action.");
  static constexpr const char* kChanges[] = {"key_reset", "override_set", "override_removed"};
  for (std::size_t i = 0; i < admin_changes.size(); ++i)
    line(out, "floodgate_admin_changes_total", label("action", kChanges[i]),
         admin_changes[i].load());
  help(out, "floodgate_admin_unauthorized_total", "counter",
       "Admin API requests refused for a missing or wrong bearer token.");
  line(out, "floodgate_admin_unauthorized_total", "", admin_unauthorized.load());
  help(out, "floodgate_config_reloads_total", "counter", "Config reloads by result.");
  line(out, "floodgate_config_reloads_total", "result=\"ok\"", reloads_ok.load());
  line(out, "floodgate_config_reloads_total", "result=\"rejected\"", reloads_failed.load());
  return out;
}

}  // namespace floodgate::admin
