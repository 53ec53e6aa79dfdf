#include "breaker.hpp"

#include <hiredis/hiredis.h>
#include <spdlog/logger.h>

#include <algorithm>

#include "store/redis/redis_connection.hpp"

namespace floodgate::store::redis {

using Clock = std::chrono::steady_clock;

BreakerOptions breaker_options(const RedisStoreOptions& store) {
  return {store.breaker_threshold, store.probe_interval,
          std::max(store.timeout, std::chrono::milliseconds(200))};
}

Breaker::Breaker(boost::asio::io_context& ioc, std::shared_ptr<Connection> conn,
                 BreakerOptions options, spdlog::logger& log, std::string name,
                 std::function<void()> changed)
    : ioc_(ioc),
      conn_(std::move(conn)),
      options_(options),
      log_(log),
      name_(std::move(name)),
      changed_(std::move(changed)),
      timer_(ioc) {}

void Breaker::failed(StoreError cause) {
  if (open() || stopped_ || ++failures_ < options_.threshold) return;
  open_ = true;
  log_.warn("redis {}: {} consecutive failures (last: {}); failing fast and probing every {} ms",
            name_, failures_, to_string(cause), options_.probe_interval.count());
  // Replies queued behind a hung server would arrive late and be dropped anyway.
  if (cause == StoreError::timeout) conn_->reset();
  if (changed_) changed_();
  probe();
}

void Breaker::stop() {
  stopped_ = true;
  timer_.cancel();
}

void Breaker::probe() {
  if (stopped_) return;
  timer_.expires_after(options_.probe_interval);
  timer_.async_wait([w = weak_from_this()](boost::system::error_code ec) {
    auto self = w.lock();
    if (ec || !self || self->stopped_) return;
    bool sent =
        self->conn_->command({"PING"}, Clock::now() + self->options_.probe_timeout,
                             [w](const redisReply* r, CommandStatus s) {
                               auto self = w.lock();
                               if (!self || self->stopped_) return;
                               if (s == CommandStatus::ok && r && r->type != REDIS_REPLY_ERROR)
                                 return self->close();
                               // A connection whose replies stopped (a hung server, a dropped NAT
                               // entry) may never answer again: the next probe goes over a new one.
                               if (s == CommandStatus::timeout) self->conn_->reset();
                               self->probe();
                             });
    if (!sent) self->probe();
  });
}

void Breaker::close() {
  open_ = false;
  failures_ = 0;
  log_.info("redis {}: answering again; limits enforced by Redis", name_);
  if (changed_) changed_();
}

}  // namespace floodgate::store::redis
