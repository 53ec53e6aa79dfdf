#pragma once
// A circuit breaker for one Redis node. After `threshold` consecutive failed decisions it
// opens: decisions for that node fail at once (the route's on_store_error, without paying the
// timeout each time) while a PING every `probe_interval` waits for the node to answer again.
// The single-node store has one; the cluster store one per master, so a dead or stalled master
// costs only the decisions of its own slots.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "floodgate/store/item.hpp"
#include "floodgate/store/redis_store.hpp"

namespace spdlog {
class logger;
}

namespace floodgate::store::redis {

class Connection;

struct BreakerOptions {
  int threshold = 3;  // consecutive failures that open it
  std::chrono::milliseconds probe_interval{250};
  std::chrono::milliseconds probe_timeout{200};
};

BreakerOptions breaker_options(const RedisStoreOptions& store);

class Breaker : public std::enable_shared_from_this<Breaker> {
 public:
  // `changed` runs on the event loop whenever the breaker opens or closes.
  Breaker(boost::asio::io_context& ioc, std::shared_ptr<Connection> conn, BreakerOptions options,
          spdlog::logger& log, std::string name, std::function<void()> changed = {});
  Breaker(const Breaker&) = delete;
  Breaker& operator=(const Breaker&) = delete;

  // Atomic: the admin thread reads it for /readyz and the health gauge.
  bool open() const { return open_.load(std::memory_order_relaxed); }
  void succeeded() { failures_ = 0; }
  void failed(StoreError cause);
  void stop();  // no more probes (teardown)

 private:
  void probe();
  void close();

  boost::asio::io_context& ioc_;
  std::shared_ptr<Connection> conn_;
  BreakerOptions options_;
  spdlog::logger& log_;
  std::string name_;  // "host:port", for the log
  std::function<void()> changed_;
  boost::asio::steady_timer timer_;
  int failures_ = 0;
  bool stopped_ = false;
  std::atomic<bool> open_{false};
};

}  // namespace floodgate::store::redis
