#include "floodgate/store/redis_store.hpp"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <charconv>

#include "store/redis/redis_connection.hpp"
#include "store/redis/script_calls.hpp"
#include "store/redis/scripts.hpp"

namespace floodgate::store {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace redis {
std::string sha1_hex(std::string_view text) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (auto b : digest) out += hex[b >> 4], out += hex[b & 15];
  return out;
}
}  // namespace redis

namespace {

using redis::decode_outcome;
using redis::is_noscript;

class RedisStore final : public LimitStore, public RedisHealth {
 public:
  RedisStore(asio::io_context& ioc, RedisStoreOptions options, spdlog::logger& log)
      : ioc_(ioc),
        options_(std::move(options)),
        log_(log),
        shas_(redis::ScriptShas::compute()),
        probe_timer_(ioc) {
    redis::ConnectionOptions c;
    c.host = options_.host;
    c.port = options_.port;
    c.username = options_.username;
    c.password = options_.password;
    conn_ = std::make_shared<redis::Connection>(ioc, c, log);
    conn_->start();
  }

  ~RedisStore() override {
    probe_timer_.cancel();
    conn_->stop();
  }

  bool healthy() const override { return conn_->connected() && !open_; }

  void async_acquire(std::vector<Item> items, Handler handler) override {
    auto call = std::make_shared<Call>(Call{std::move(items), std::move(handler)});
    if (open_ || !conn_->connected()) return finish(call, StoreError::unavailable);
    send(call, false);
  }

  void adjust(const Item& item, std::int64_t delta) override {
    if (open_ || !conn_->connected())
      return;  // best effort: a lost settlement errs neither way for long
    auto args = std::make_shared<std::vector<std::string>>(
        redis::adjust_args(item, delta, shas_, redis::now_arg(options_.test_clock)));
    send_simple(args, true);
  }

  void release(const Item& item) override {
    if (!conn_->connected()) return;  // the lease expires by itself
    auto args = std::make_shared<std::vector<std::string>>(
        std::vector<std::string>{"ZREM", item.key, item.lease});
    send_simple(args, false);
  }

 private:
  struct Call {
    std::vector<Item> items;
    Handler handler;
    bool done = false;
  };

  void send(const std::shared_ptr<Call>& call, bool use_eval) {
    auto args = redis::acquire_args(call->items, shas_, use_eval,
                                    redis::now_arg(options_.test_clock), options_.instance_id);
    std::vector<std::string_view> views(args.begin(), args.end());
    bool sent = conn_->command(views, Clock::now() + options_.timeout,
                               [this, call, use_eval](const redisReply* r, redis::CommandStatus s) {
                                 on_acquire_reply(call, r, s, use_eval);
                               });
    if (!sent) finish(call, StoreError::unavailable);
  }

  void on_acquire_reply(const std::shared_ptr<Call>& call, const redisReply* r,
                        redis::CommandStatus s, bool used_eval) {
    if (s == redis::CommandStatus::timeout) return failed(call, StoreError::timeout);
    if (s != redis::CommandStatus::ok) return failed(call, StoreError::unavailable);
    if (is_noscript(r) && !used_eval) return send(call, true);  // script cache flushed: once more
    auto outcome = decode_outcome(r, call->items.size());
    if (!outcome) {
      if (r && r->type == REDIS_REPLY_ERROR)
        log_.error("redis acquire script failed: {}", std::string(r->str, r->len));
      return failed(call, StoreError::protocol);
    }
    failures_ = 0;
    finish(call, std::move(*outcome));
  }

  void send_simple(const std::shared_ptr<std::vector<std::string>>& args, bool script) {
    std::vector<std::string_view> views(args->begin(), args->end());
    conn_->command(views, Clock::now() + options_.timeout * 4,
                   [this, args, script](const redisReply* r, redis::CommandStatus s) {
                     if (s == redis::CommandStatus::ok && script && is_noscript(r)) {
                       (*args)[0] = "EVAL";
                       (*args)[1] = std::string(redis::adjust_script());
                       send_simple(args, false);
                     }
                   });
  }

  void failed(const std::shared_ptr<Call>& call, StoreError e) {
    if (++failures_ >= options_.breaker_threshold && !open_) open_breaker(e);
    finish(call, e);
  }

  // Completion is posted: never inline on the caller's stack, and never during teardown.
  void finish(const std::shared_ptr<Call>& call, AcquireResult result) {
    if (call->done) return;
    call->done = true;
    asio::post(ioc_,
               [call, r = std::move(result)]() mutable { std::move(call->handler)(std::move(r)); });
  }

  void open_breaker(StoreError cause) {
    open_ = true;
    log_.warn(
        "redis {}:{}: {} consecutive failures (last: {}); failing fast and probing every {} ms",
        options_.host, options_.port, failures_, to_string(cause), options_.probe_interval.count());
    // Replies queued behind a hung server would arrive late and be dropped anyway.
    if (cause == StoreError::timeout) conn_->reset();
    probe();
  }

  void probe() {
    probe_timer_.expires_after(options_.probe_interval);
    probe_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      std::vector<std::string_view> ping{"PING"};
      bool sent = conn_->command(
          ping, Clock::now() + std::max(options_.timeout, std::chrono::milliseconds(200)),
          [this](const redisReply* r, redis::CommandStatus s) {
            if (s == redis::CommandStatus::ok && r && r->type != REDIS_REPLY_ERROR) {
              open_ = false;
              failures_ = 0;
              log_.info("redis {}:{}: answering again; limits enforced by Redis", options_.host,
                        options_.port);
            } else {
              probe();
            }
          });
      if (!sent) probe();
    });
  }

  asio::io_context& ioc_;
  RedisStoreOptions options_;
  spdlog::logger& log_;
  redis::ScriptShas shas_;
  std::shared_ptr<redis::Connection> conn_;
  asio::steady_timer probe_timer_;
  int failures_ = 0;
  bool open_ = false;
};

}  // namespace

std::unique_ptr<LimitStore> make_redis_store(asio::io_context& ioc, RedisStoreOptions options,
                                             spdlog::logger& log) {
  return std::make_unique<RedisStore>(ioc, std::move(options), log);
}

}  // namespace floodgate::store
