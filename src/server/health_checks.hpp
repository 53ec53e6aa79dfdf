#pragma once
// Active health checks (upstreams.NAME.health_check), run on one worker's loop for the whole
// process: every `interval`, each server of each checked upstream is asked `GET path` on a
// connection of its own (HTTP/1.1, closed after the answer) or, for an h2 upstream, on a
// stream of a pooled connection. A 2xx or 3xx within `timeout` passes. The verdict is the
// server's ServerHealth, which every worker's balancer reads; transitions are logged.

#include <boost/asio/awaitable.hpp>

#include "exchange/services.hpp"
#include "h2/upstream_h2.hpp"
#include "net/upstreams.hpp"

namespace floodgate::http {

// What the checks use: the worker's upstreams and h2 connections, and its services (the
// snapshot, the drain, the log). `running` counts the checks' coroutines (the drain waits).
struct HealthChecks {
  Upstreams& upstreams;
  H2UpstreamPool& h2;
  Services& services;
  int running = 0;
};

// Runs until the worker drains; counted (with each check) in w.running.
boost::asio::awaitable<void> run_health_checks(HealthChecks& w);

}  // namespace floodgate::http
