#pragma once
// Active health checks (upstreams.NAME.health_check), run on one worker's loop for the whole
// process: every `interval`, each server of each checked upstream is asked `GET path` on a
// connection of its own (HTTP/1.1, closed after the answer) or, for an h2 upstream, on a
// stream of a pooled connection. A 2xx or 3xx within `timeout` passes. The verdict is the
// server's ServerHealth, which every worker's balancer reads; transitions are logged.

#include <boost/asio/awaitable.hpp>

#include "worker_context.hpp"

namespace floodgate::http {

// Runs until the worker drains; counted (with each check) in w.health_checks.
boost::asio::awaitable<void> run_health_checks(WorkerContext& w);

}  // namespace floodgate::http
