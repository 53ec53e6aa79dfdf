#pragma once
// A worker's way to its upstreams: the pool of HTTP/1.1 connections, which server a request
// goes to (another one when no connection can be made), and what each server's requests come
// to (its metrics, and the failures that eject it). The driver and the health checks use it;
// everything here belongs to the worker's thread.

#include <spdlog/logger.h>

#include <chrono>
#include <string>
#include <string_view>
#include <unordered_map>

#include "floodgate/config/config.hpp"
#include "floodgate/log_throttle.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "upstream_health.hpp"
#include "upstream_pool.hpp"

namespace floodgate::http {

class Upstreams {
 public:
  Upstreams(boost::asio::any_io_executor ex, UpstreamHealth& health, spdlog::logger& log,
            metrics::Metrics& metrics)
      : pool(ex), balancer(health), log(log), metrics(metrics) {}

  UpstreamPool pool;
  UpstreamBalancer balancer;
  spdlog::logger& log;
  metrics::Metrics& metrics;
  LogThrottle errors;  // upstream failures: at most a line a second

  // The server for a request to `up`: the one it is sent to, counted in flight until the
  // ServerUse ends.
  ServerUse server(const config::ConfigPtr& c, const config::Upstream& up) {
    return balancer.pick(c, up);
  }
  // Another server for a request whose connection to `use`'s could not be made (nothing of
  // it was sent, so it cannot have been processed): true with `use` holding the new one.
  // Once per request, as a retry budget of one.
  bool retry(const config::ConfigPtr& c, ServerUse& use);
  // The request goes again to `use`'s server on another connection (the call said it may).
  void resent(ServerUse& use);
  // `use`'s server answered with `status` `took` after the request was sent: its latency and
  // status class; a 5xx counts toward its ejection.
  void answered(ServerUse& use, std::chrono::steady_clock::duration took, int status);
  // A connection to `use`'s server could not be made: counted (a timeout apart) and logged,
  // at most a line a second.
  void connect_failed(ServerUse& use, bool timeout, std::string_view why);
  // The response did not come in time.
  void timed_out(ServerUse& use);
  // A request's end on its server, toward (or ending) a run of failures that ejects it.
  void outcome(ServerUse& use, bool failed);

 private:
  // Per-worker lookups of the shared metric cells (the registry's lock is taken once per name).
  metrics::UpstreamMetrics& stats(const std::string& name);
  std::unordered_map<std::string, metrics::UpstreamMetrics*> stats_;
};

}  // namespace floodgate::http
