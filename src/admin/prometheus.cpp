#include "floodgate/admin/prometheus.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <initializer_list>

#include "process_stats.hpp"

namespace floodgate::admin {

using metrics::Histogram;
using metrics::kOwnStatuses;
using metrics::LeaseCounters;
using metrics::Metrics;
using metrics::Outcome;
using metrics::OwnStatusCounts;
using metrics::UpstreamServerSample;

namespace {

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

// The _bucket / _sum / _count lines; `labels` is "" or `a="b",c="d"`.
// A series of one value, without labels.
struct Scalar {
  const char* name;
  const char* type;
  const char* text;
  std::uint64_t value;
};

void scalar(std::string& out, const Scalar& s) {
  help(out, s.name, s.type, s.text);
  line(out, s.name, "", s.value);
}

// A counter's or a gauge's value as rendered: a gauge never shows below 0.
template <typename T>
std::uint64_t count(T v) {
  return static_cast<std::uint64_t>(std::max<T>(0, v));
}

void render(const Histogram& h, std::string& out, std::string_view name, std::string_view labels) {
  std::uint64_t cumulative = 0;
  std::string prefix(labels);
  if (!prefix.empty()) prefix += ',';
  const auto buckets = h.buckets();
  const auto& bounds = h.bounds();
  for (std::size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += buckets[i];
    std::string le = i < bounds.size() ? num(bounds[i]) : "+Inf";
    line(out, std::string(name) + "_bucket", prefix + "le=\"" + le + "\"", cumulative);
  }
  out.append(name).append("_sum");
  if (!labels.empty()) out.append("{").append(labels).append("}");
  out.append(" ").append(num(h.sum_seconds())).append("\n");
  line(out, std::string(name) + "_count", labels, h.count());
}

// process_*, as the Prometheus client libraries name them (from /proc).
void render_process(std::string& out) {
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
}

// Per route: outcomes, refusals by limit, own statuses, deny-cache hits, leases.
void render_routes(std::string& out, const Metrics& m, const Metrics::Tables& t) {
  help(out, "floodgate_requests_total", "counter", "Requests by route and limit decision.");
  for (const auto& [name, r] : t.routes)
    for (std::size_t i = 0; i < r->outcomes.size(); ++i)
      line(out, "floodgate_requests_total",
           label("route", name) + "," + label("outcome", to_string(static_cast<Outcome>(i))),
           r->outcomes[i].load(std::memory_order_relaxed));
  help(out, "floodgate_protocol_requests_total", "counter",
       "Requests by the protocol the client spoke (http1, h2, h3; rls: Envoy's RLS calls).");
  for (std::size_t i = 0; i < Metrics::kProtocols.size(); ++i)
    line(out, "floodgate_protocol_requests_total", label("protocol", Metrics::kProtocols[i]),
         m.protocol_requests[i].load(std::memory_order_relaxed));
  help(out, "floodgate_limit_refusals_total", "counter",
       "Requests a limit refused (mode enforced: answered 429) or would have (shadow).");
  for (const auto& [names, c] : t.limits) {
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
  own("", m.unrouted_statuses);
  for (const auto& [name, r] : t.routes) own(name, r->own_statuses);
  help(out, "floodgate_deny_cache_hits_total", "counter",
       "Refusals answered from the local deny cache.");
  for (const auto& [name, r] : t.routes)
    line(out, "floodgate_deny_cache_hits_total", label("route", name), r->deny_cache_hits.load());

  if (!t.leases.empty()) {
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
      for (const auto& [names, c] : t.leases)
        line(out, l.name, label("route", names.first) + "," + label("limit", names.second),
             ((*c).*l.counter).load(std::memory_order_relaxed));
    }
  }
}

void render_store(std::string& out, const Metrics& m) {
  help(out, "floodgate_decision_seconds", "histogram", "Time for a store decision, by backend.");
  render(m.decision_memory, out, "floodgate_decision_seconds", label("backend", "memory"));
  render(m.decision_redis, out, "floodgate_decision_seconds", label("backend", "redis"));
  help(out, "floodgate_store_errors_total", "counter", "Store decisions that failed, by kind.");
  static constexpr const char* kinds[] = {"timeout", "unavailable", "protocol"};
  for (std::size_t i = 0; i < m.store_errors.size(); ++i)
    line(out, "floodgate_store_errors_total", label("kind", kinds[i]), m.store_errors[i].load());
  if (m.store_health) {
    auto [healthy, total] = m.store_health();
    help(out, "floodgate_store_healthy_connections", "gauge",
         "Workers whose store connection is up with its circuit breaker closed.");
    line(out, "floodgate_store_healthy_connections", label("backend", m.backend),
         static_cast<std::uint64_t>(healthy));
    help(out, "floodgate_store_circuit_open", "gauge",
         "Workers whose store circuit breaker is open or disconnected.");
    line(out, "floodgate_store_circuit_open", label("backend", m.backend),
         static_cast<std::uint64_t>(total - healthy));
  }
  help(out, "floodgate_memory_store_evictions_total", "counter",
       "Keys evicted from the embedded store at its cap.");
  line(out, "floodgate_memory_store_evictions_total", "",
       m.memory_evictions ? m.memory_evictions() : 0);
}

void render_upstreams(std::string& out, const Metrics& m, const Metrics::Tables& t) {
  help(out, "floodgate_upstream_responses_total", "counter", "Upstream responses by status class.");
  for (const auto& [name, u] : t.upstreams)
    for (std::size_t c = 1; c <= 5; ++c)
      line(out, "floodgate_upstream_responses_total",
           label("upstream", name) + "," + label("class", std::to_string(c) + "xx"),
           u->by_class[c].load());
  help(out, "floodgate_upstream_errors_total", "counter",
       "Upstream failures: connect errors and timeouts.");
  for (const auto& [name, u] : t.upstreams) {
    line(out, "floodgate_upstream_errors_total", label("upstream", name) + ",kind=\"connect\"",
         u->connect_errors.load());
    line(out, "floodgate_upstream_errors_total", label("upstream", name) + ",kind=\"timeout\"",
         u->timeouts.load());
  }
  help(out, "floodgate_upstream_retries_total", "counter",
       "Requests sent to another server after a connection to the first could not be made.");
  for (const auto& [name, u] : t.upstreams)
    line(out, "floodgate_upstream_retries_total", label("upstream", name), u->retries.load());
  help(out, "floodgate_upstream_resent_total", "counter",
       "Requests sent again to the same server on another connection: a reused keep-alive "
       "connection found closed, or an HTTP/2 stream the origin refused unprocessed.");
  for (const auto& [name, u] : t.upstreams)
    line(out, "floodgate_upstream_resent_total", label("upstream", name), u->resent.load());
  help(out, "floodgate_upstream_latency_seconds", "histogram",
       "Request sent to response header, by upstream.");
  for (const auto& [name, u] : t.upstreams)
    render(u->latency, out, "floodgate_upstream_latency_seconds", label("upstream", name));

  if (m.upstream_servers) {
    auto servers = m.upstream_servers();
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
}

// The listeners, delays, JWKS, HTTP/2 floods, the admin API and reloads.
void render_server(std::string& out, const Metrics& m) {
  help(out, "floodgate_accept_pauses_total", "counter",
       "Times accepting paused: at server.max_connections (new connections wait in the "
       "listen queue), or out of descriptors or memory.");
  line(out, "floodgate_accept_pauses_total", "reason=\"max_connections\"",
       m.accept_pauses[static_cast<std::size_t>(Metrics::AcceptPause::max_connections)].load());
  line(out, "floodgate_accept_pauses_total", "reason=\"resources\"",
       m.accept_pauses[static_cast<std::size_t>(Metrics::AcceptPause::resources)].load());
  // One series each, without labels.
  for (const auto& s : std::initializer_list<Scalar>{
           {"floodgate_active_connections", "gauge", "Open downstream connections.",
            count(m.active_connections.load())},
           {"floodgate_active_websockets", "gauge", "Open WebSocket tunnels.",
            count(m.active_tunnels.load())},
           {"floodgate_tls_handshake_failures_total", "counter",
            "Downstream TLS handshakes that failed (protocol, version, timeout or closed).",
            count(m.tls_handshake_failures.load())},
           {"floodgate_delayed_requests_total", "counter",
            "Requests an on_exceed: delay limit held until their units had refilled.",
            count(m.delayed_total.load())},
           {"floodgate_delayed_requests", "gauge",
            "Requests held by on_exceed: delay limits now, or being decided with a place to be "
            "held (at most server.max_delayed).",
            count(m.delayed_now.load())},
           {"floodgate_jwks_keys", "gauge", "Signature keys in the JWKS in use.",
            count(m.jwks_keys.load())},
           {"floodgate_jwks_updated_timestamp_seconds", "gauge",
            "When the JWKS in use was fetched (Unix time; 0: none yet).",
            count(m.jwks_updated_seconds.load())},
           {"floodgate_unexpected_exceptions_total", "counter",
            "Exceptions caught at a worker's boundary (a bug: the log has each one).",
            count(m.unexpected_exceptions.load())},
           {"floodgate_http2_flood_goaways_total", "counter",
            "HTTP/2 connections ended with GOAWAY ENHANCE_YOUR_CALM (resets past "
            "max_resets_per_second, empty DATA frames).",
            count(m.http2_flood_goaways.load())},
           {"floodgate_http2_stalled_streams_total", "counter",
            "HTTP/2 streams reset because the client took none of the response for timeouts.idle.",
            count(m.http2_stalled_streams.load())},
           {"floodgate_http3_retries_total", "counter",
            "QUIC Retry packets sent: new connections asked to prove their address while many "
            "handshakes were under way.",
            count(m.http3_retries_sent.load())},
           {"floodgate_http3_retry_failures_total", "counter",
            "QUIC Initials dropped for a forged or stale Retry token.",
            count(m.http3_retries_failed.load())},
           {"floodgate_http3_handshake_timeouts_total", "counter",
            "QUIC handshakes not finished within timeouts.header_read.",
            count(m.http3_handshake_timeouts.load())},
           {"floodgate_http3_flood_closes_total", "counter",
            "HTTP/3 connections closed with H3_EXCESSIVE_LOAD (stream resets past "
            "max_resets_per_second).",
            count(m.http3_flood_closes.load())},
           {"floodgate_http3_stalled_streams_total", "counter",
            "HTTP/3 streams reset because the client took none of the response for timeouts.idle.",
            count(m.http3_stalled_streams.load())},
           {"floodgate_admin_unauthorized_total", "counter",
            "Admin API requests refused for a missing or wrong bearer token.",
            count(m.admin_unauthorized.load())},
       })
    scalar(out, s);
  help(out, "floodgate_jwks_fetches_total", "counter",
       "Fetches of jwt.jwks by result (a failed one keeps the last good key set).");
  line(out, "floodgate_jwks_fetches_total", "result=\"ok\"", m.jwks_fetches_ok.load());
  line(out, "floodgate_jwks_fetches_total", "result=\"error\"", m.jwks_fetches_failed.load());
  help(out, "floodgate_admin_changes_total", "counter",
       "Changes made through the admin API, by action.");
  static constexpr const char* kChanges[] = {"key_reset", "override_set", "override_removed"};
  for (std::size_t i = 0; i < m.admin_changes.size(); ++i)
    line(out, "floodgate_admin_changes_total", label("action", kChanges[i]),
         m.admin_changes[i].load());
  help(out, "floodgate_config_reloads_total", "counter", "Config reloads by result.");
  line(out, "floodgate_config_reloads_total", "result=\"ok\"", m.reloads_ok.load());
  line(out, "floodgate_config_reloads_total", "result=\"rejected\"", m.reloads_failed.load());
  if (m.config_identity) {
    const auto [version, sha256] = m.config_identity();
    help(out, "floodgate_config_info", "gauge",
         "The config in force: its version: and the SHA-256 of its bytes.");
    line(out, "floodgate_config_info", label("version", version) + "," + label("sha256", sha256),
         1);
  }
  help(out, "floodgate_config_last_applied_timestamp_seconds", "gauge",
       "Unix time the config in force was applied (start, reload or config_source).");
  line(out, "floodgate_config_last_applied_timestamp_seconds", "",
       count(m.config_applied_seconds.load()));
  help(out, "floodgate_config_updates_total", "counter",
       "Configs fetched from config_source, by result.");
  static constexpr const char* kUpdates[] = {"applied",       "unchanged", "bad_signature",
                                             "stale_version", "invalid",   "fetch_error"};
  for (std::size_t i = 0; i < m.config_updates.size(); ++i)
    line(out, "floodgate_config_updates_total", label("result", kUpdates[i]),
         m.config_updates[i].load());
}

}  // namespace

std::string render_prometheus(const Metrics& m) {
  std::string out;
  out.reserve(8192);
  help(out, "floodgate_build_info", "gauge", "Version and PoP of this instance.");
  line(out, "floodgate_build_info", label("version", m.version()) + "," + label("pop", m.pop()), 1);

  render_process(out);
  m.with_tables([&](const Metrics::Tables& t) {
    render_routes(out, m, t);
    render_store(out, m);
    render_upstreams(out, m, t);
    render_server(out, m);
  });
  return out;
}

}  // namespace floodgate::admin
