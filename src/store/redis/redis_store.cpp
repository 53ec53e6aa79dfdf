#include "floodgate/store/redis_store.hpp"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <charconv>

#include "store/redis/breaker.hpp"
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

using redis::breaker_options;
using redis::decode_outcome;
using redis::is_noscript;

class RedisStore final : public LimitStore {
 public:
  RedisStore(asio::io_context& ioc, RedisStoreOptions options, spdlog::logger& log)
      : ioc_(ioc), options_(std::move(options)), log_(log), shas_(redis::ScriptShas::compute()) {
    redis::ConnectionOptions c;
    c.host = options_.host;
    c.port = options_.port;
    c.username = options_.username;
    c.password = options_.password;
    conn_ = std::make_shared<redis::Connection>(ioc, c, log);
    breaker_ =
        std::make_shared<redis::Breaker>(ioc, conn_, breaker_options(options_), log,
                                         options_.host + ":" + std::to_string(options_.port));
    conn_->start();
  }

  ~RedisStore() override {
    breaker_->stop();
    conn_->stop();
  }

  bool healthy() const override { return conn_->connected() && !breaker_->open(); }

  void async_acquire(std::vector<Item> items, Handler handler) override {
    auto call = std::make_shared<Call>(
        Call{std::move(items), std::move(handler), Clock::now() + options_.timeout});
    if (breaker_->open() || !conn_->connected()) return finish(call, StoreError::unavailable);
    send(call, false);
  }

  void adjust(const Item& item, std::int64_t delta) override {
    if (breaker_->open() || !conn_->connected())
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
    Clock::time_point deadline;  // one budget, a NOSCRIPT retry included
    bool done = false;
  };

  void send(const std::shared_ptr<Call>& call, bool use_eval) {
    auto args = redis::acquire_args(call->items, shas_, use_eval,
                                    redis::now_arg(options_.test_clock), options_.instance_id);
    std::vector<std::string_view> views(args.begin(), args.end());
    bool sent = conn_->command(views, call->deadline,
                               [this, call, use_eval](const redisReply* r, redis::CommandStatus s) {
                                 try {
                                   on_acquire_reply(call, r, s, use_eval);
                                 } catch (...) {
                                   // The decision fails; the event loop logs and counts it.
                                   failed(call, StoreError::protocol);
                                   throw;
                                 }
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
    breaker_->succeeded();
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
    breaker_->failed(e);
    finish(call, e);
  }

  // Completion is posted: never inline on the caller's stack, and never during teardown.
  void finish(const std::shared_ptr<Call>& call, AcquireResult result) {
    if (call->done) return;
    call->done = true;
    asio::post(ioc_,
               [call, r = std::move(result)]() mutable { std::move(call->handler)(std::move(r)); });
  }

  asio::io_context& ioc_;
  RedisStoreOptions options_;
  spdlog::logger& log_;
  redis::ScriptShas shas_;
  std::shared_ptr<redis::Connection> conn_;
  std::shared_ptr<redis::Breaker> breaker_;
};

}  // namespace

std::unique_ptr<LimitStore> make_redis_store(asio::io_context& ioc, RedisStoreOptions options,
                                             spdlog::logger& log) {
  return std::make_unique<RedisStore>(ioc, std::move(options), log);
}

}  // namespace floodgate::store
