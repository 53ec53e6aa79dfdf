#pragma once
// What a front (an HTTP/1.1 session, an HTTP/2 connection) needs of its worker to take a
// request through: the snapshot it is served under, the clock, request ids, the decision
// (decide::Gate), the proxy an admitted exchange goes through, the access log; and the
// worker's state a front watches (its sessions, requests in flight, a drain). One per worker,
// used only on its thread (the config source is atomic, the loggers thread-safe).

#include <spdlog/logger.h>

#include <chrono>
#include <cstdint>
#include <utility>

#include "floodgate/config/config_source.hpp"
#include "floodgate/decide/gate.hpp"
#include "floodgate/keys/jwks.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "net/session_registry.hpp"
#include "pipeline.hpp"
#include "proxy.hpp"
#include "request_id.hpp"
#include "stream_service.hpp"

namespace floodgate::http {

class Services {
 public:
  Services(config::ConfigSource& config, const limit::Clock& clock, decide::Gate& gate,
           Proxy& proxy, spdlog::logger& log, spdlog::logger& access_log, keys::JwksCell* jwks,
           metrics::Metrics& metrics)
      : gate(gate),
        proxy(proxy),
        log(log),
        metrics(metrics),
        snapshots_(config),
        clock_(clock),
        access_log_(access_log),
        jwks_(jwks) {}

  // The snapshot a new request is served under (SnapshotCache: no lock per request).
  config::ConfigPtr snapshot() { return snapshots_.get(); }

  // A request whose head has been read: the snapshot it is served under, its arrival.
  void open(Exchange& x, config::ConfigPtr config) {
    x.config = std::move(config);
    x.arrived = clock_.now();
    if (x.config->log.access_log) x.started = std::chrono::steady_clock::now();
  }
  // Once the front has filled in the head and the connection's facts: the issuer's keys and
  // the request id (before anything can answer it).
  void identify(Exchange& x) {
    x.jwks = jwks_;
    http::identify(x, request_ids_);
  }
  // However it ended: its line in the access log, when that is on.
  void close(Exchange& x) {
    metrics.count_protocol(x.protocol);
    if (x.config->log.access_log) log_exchange(x, access_log_, gate.hasher(*x.config));
  }

  decide::Gate& gate;
  // What answers an rls.listen listener's streams (Envoy's rate limit service); set by the
  // worker.
  StreamService* rls = nullptr;
  Proxy& proxy;
  spdlog::logger& log;
  metrics::Metrics& metrics;

  // Every session's coroutine ends before the worker stops its loop (the drain), so no
  // session frame outlives these services.
  SessionRegistry sessions;
  std::uint64_t in_flight = 0;  // requests between header read and response end
  bool draining = false;        // set once: finish the current request, then close

 private:
  config::SnapshotCache snapshots_;
  const limit::Clock& clock_;
  RequestIds request_ids_;  // X-Request-Id and trace ids
  spdlog::logger& access_log_;
  keys::JwksCell* jwks_;  // the issuer's keys, when jwt.jwks is fetched
};

}  // namespace floodgate::http
