#pragma once
// The admin listener: GET /metrics (Prometheus text), /healthz, /readyz, /config (secrets
// redacted), the live view: / (a page), /stats and /top (live_view.hpp), and behind a token
// the write API: /keys and /overrides (admin_api.hpp). Its own thread
// and event loop, never the traffic listeners: it stays up during a drain so that /readyz can
// say 503 while in-flight requests finish.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "admin_api.hpp"
#include "floodgate/config/config_source.hpp"
#include "floodgate/limit/heavy_hitters.hpp"
#include "floodgate/metrics/metrics.hpp"

namespace spdlog {
class logger;
}

namespace floodgate::admin {

using metrics::Metrics;  // the counters admin renders (metrics/)

struct AdminState {
  std::atomic<bool> draining{false};
};

class AdminServer {
 public:
  AdminServer(const config::Endpoint& listen, config::ConfigSource& config, Metrics& metrics,
              AdminState& state, spdlog::logger& log, AdminApi api = {});
  ~AdminServer();
  void start();  // binds (throws std::system_error naming the address) and starts its thread
  std::uint16_t port() const;
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The /config document: the running config as JSON with every secret replaced.
std::string redacted_config_json(const config::Config& config);

}  // namespace floodgate::admin
