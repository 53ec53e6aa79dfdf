#pragma once
// The traffic side of floodgate: share-nothing workers, each with its own event loop,
// its own SO_REUSEPORT acceptor per listener and its own upstream connection pools.
// Asio and Beast stay behind this pimpl so that including it costs nothing.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "floodgate/config/config_source.hpp"
#include "floodgate/decide/worker_control.hpp"
#include "floodgate/limit/caller_overrides.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/limit/heavy_hitters.hpp"

namespace spdlog {
class logger;
}
namespace boost::asio {
class io_context;
}
namespace floodgate::keys {
class JwksCell;
}

namespace floodgate::store {
class LimitStore;
}
namespace floodgate::metrics {
class Metrics;
struct UpstreamServerSample;
}  // namespace floodgate::metrics

namespace floodgate::http {

using StoreFactory = std::function<std::unique_ptr<store::LimitStore>(boost::asio::io_context&)>;

// What the server is built from, chosen by app/: the clock decisions read and, per worker,
// the configured store and the in-process store used as the `local` fallback.
struct ServerDeps {
  const limit::Clock& clock;
  StoreFactory make_store;
  StoreFactory make_local;
  metrics::Metrics& metrics;
  spdlog::logger* access_log = nullptr;  // one JSON line per request when log.access_log is on
  const limit::OverrideBoard* overrides = nullptr;  // per-caller overrides (admin API), or none
  keys::JwksCell* jwks = nullptr;  // jwt.jwks's keys, fetched by the app (JwksRefresher)
};

using decide::KeyAnswer;
using decide::KeyRequest;

// What the admin listener asks of the workers (decide::WorkerControl) is answered here.
class Server final : public decide::WorkerControl {
 public:
  Server(config::ConfigSource& config, std::shared_ptr<spdlog::logger> log, ServerDeps deps);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds every listener (throws std::system_error naming the address on failure) and starts
  // the worker threads. Returns once the sockets are listening.
  void start();
  // The bound port of each listener, in config order: server.listen, then rls.listen (useful
  // with port 0).
  std::vector<std::uint16_t> ports() const;
  // Stops accepting, lets in-flight requests finish for up to `grace`, then stops the workers
  // and joins their threads.
  void drain(std::chrono::milliseconds grace);
  // Every upstream server's counters and state (the metrics).
  std::vector<metrics::UpstreamServerSample> upstream_servers() const;
  std::pair<int, int> store_health() const override;
  std::vector<limit::LimitTop> top(std::chrono::milliseconds wait) const override;
  // Decided on the first worker's loop.
  KeyAnswer keys(const KeyRequest& request, std::chrono::milliseconds wait) const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace floodgate::http
