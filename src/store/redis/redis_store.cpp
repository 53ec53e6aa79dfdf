#include "floodgate/store/redis_store.hpp"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <charconv>
#include <deque>

#include "store/redis/breaker.hpp"
#include "store/redis/redis_connection.hpp"
#include "store/redis/script_calls.hpp"
#include "store/redis/scripts.hpp"
#include "store/redis/sentinel.hpp"

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
using redis::Via;

// Requests waiting in one loop turn go to Redis as one call (lua/acquire.lua decides them in
// order, each on its own). Bounded so one call's reply and time in Redis stay small; the rest
// follow in the next call, pipelined behind it.
constexpr std::size_t kMaxBatchRequests = 64;
constexpr std::size_t kMaxBatchItems = 256;

class RedisStore final : public LimitStore {
 public:
  RedisStore(asio::io_context& ioc, RedisStoreOptions options, spdlog::logger& log)
      : ioc_(ioc),
        options_(std::move(options)),
        log_(log),
        scripts_(redis::Scripts::compute(options_.test_time.library)),
        alive_(std::make_shared<RedisStore*>(this)) {
    redis::ConnectionOptions c;
    c.host = options_.host;
    c.port = options_.port;
    c.access = options_.access;
    auto name = options_.host + ":" + std::to_string(options_.port);
    if (!options_.sentinels.empty()) {
      sentinels_ = redis::SentinelLocator::make(ioc, options_.sentinels, options_.master_name,
                                                options_.sentinel_access, log);
      c.locate = [w = std::weak_ptr(sentinels_)](redis::Located found) {
        if (auto s = w.lock()) s->locate(std::move(found));
      };
      c.master_name = name = options_.master_name;
      c.connect_timeout +=
          redis::SentinelLocator::kAskTimeout * static_cast<int>(options_.sentinels.size());
      sentinels_->start();
    }
    conn_ = std::make_shared<redis::Connection>(ioc, c, log);
    breaker_ = std::make_shared<redis::Breaker>(ioc, conn_, breaker_options(options_), log, name);
    conn_->start();
  }

  ~RedisStore() override {
    alive_.reset();
    breaker_->stop();
    conn_->stop();
    if (sentinels_) sentinels_->stop();
    for (auto& call : queue_) finish(call, StoreError::unavailable);
  }

  bool healthy() const override { return conn_->connected() && !breaker_->open(); }

  void async_acquire(std::vector<Item> items, Handler handler) override {
    auto call = std::make_shared<Call>(
        Call{std::move(items), std::move(handler), Clock::now() + options_.timeout});
    if (breaker_->open() || !conn_->connected()) return finish(call, StoreError::unavailable);
    queue_.push_back(std::move(call));
    if (flush_posted_) return;
    flush_posted_ = true;
    asio::post(ioc_, [alive = std::weak_ptr<RedisStore*>(alive_)] {
      if (auto self = alive.lock()) (*self)->flush();
    });
  }

  void adjust(const Item& item, std::int64_t delta) override {
    if (breaker_->open() || !conn_->connected())
      return;  // best effort: a lost settlement errs neither way for long
    auto args = std::make_shared<std::vector<std::string>>(redis::adjust_args(
        item, delta, scripts_, way_.via, redis::now_arg(options_.test_time.clock)));
    send_adjust(args, way_.via);
  }

  void release(const Item& item) override {
    if (!conn_->connected()) return;  // the lease expires by itself
    conn_->command({"ZREM", item.key, item.lease}, Clock::now() + options_.timeout * 4,
                   [](const redisReply*, redis::CommandStatus) {});
  }

  void reset(const Item& item) override {
    if (!conn_->connected()) return;
    // The state key only: `<key>:leases` keeps what instances hold, so that a reset bucket
    // still refills only to what they do not hold.
    conn_->command({"DEL", item.key}, Clock::now() + options_.timeout * 4,
                   [](const redisReply*, redis::CommandStatus) {});
  }

 private:
  struct Call {
    std::vector<Item> items;
    Handler handler;
    Clock::time_point deadline;
    bool done = false;
  };
  // One script call: the requests of a loop turn, and its arguments (sent again as they are,
  // but for args[0..1], after a missing library or script).
  struct Batch {
    std::vector<std::shared_ptr<Call>> calls;
    std::vector<const std::vector<Item>*> requests;  // each call's items, for the reply too
    std::vector<std::string> args;
    Clock::time_point deadline;  // the earliest call's: one budget, a resend included
  };

  void flush() {
    flush_posted_ = false;
    while (!queue_.empty()) {
      auto batch = std::make_shared<Batch>();
      std::size_t items = 0;
      while (!queue_.empty() && batch->calls.size() < kMaxBatchRequests &&
             (batch->calls.empty() || items + queue_.front()->items.size() <= kMaxBatchItems)) {
        items += queue_.front()->items.size();
        batch->calls.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      batch->deadline = batch->calls.front()->deadline;
      for (const auto& c : batch->calls) batch->requests.push_back(&c->items);
      batch->args =
          redis::acquire_args(batch->requests, scripts_, way_.via,
                              redis::now_arg(options_.test_time.clock), options_.instance_id);
      send(batch, way_.via);
    }
  }

  void send(const std::shared_ptr<Batch>& batch, Via via) {
    if (breaker_->open() || !conn_->connected()) return fail_all(*batch, StoreError::unavailable);
    redis::address(batch->args, redis::Script::acquire, via, scripts_);
    redis::load_library_for(*conn_, via, scripts_, batch->deadline);
    std::vector<std::string_view> views(batch->args.begin(), batch->args.end());
    bool sent = conn_->command(views, batch->deadline,
                               [this, batch, via](const redisReply* r, redis::CommandStatus s) {
                                 try {
                                   on_reply(batch, r, s, via);
                                 } catch (...) {
                                   // The decisions fail; the event loop logs and counts it.
                                   fail_all(*batch, StoreError::protocol);
                                   throw;
                                 }
                               });
    if (!sent) fail_all(*batch, StoreError::unavailable);
  }

  void on_reply(const std::shared_ptr<Batch>& batch, const redisReply* r, redis::CommandStatus s,
                Via via) {
    if (s == redis::CommandStatus::timeout) return fail_all(*batch, StoreError::timeout);
    if (s != redis::CommandStatus::ok) return fail_all(*batch, StoreError::unavailable);
    if (auto again = redis::resend_via(r, via)) return send(batch, remember(*again));
    std::string error;
    auto answers = redis::decode_outcomes(r, batch->requests, &error);
    if (!answers) {
      if (r && r->type == REDIS_REPLY_ERROR)
        log_.error("redis acquire script failed: {}", std::string(r->str, r->len));
      return fail_all(*batch, StoreError::protocol);
    }
    breaker_->succeeded();
    // A request whose own decision raised an error (a key of another type) fails alone; the
    // store answered, so its breaker does not count it.
    if (!error.empty()) log_.error("redis acquire script failed for one request: {}", error);
    for (std::size_t i = 0; i < batch->calls.size(); ++i)
      finish(batch->calls[i], std::move((*answers)[i]));
  }

  Via remember(Via next) {
    if (way_.follow(next))
      log_.warn("redis {}:{}: no functions (Redis < 7 or an ACL without FCALL); using scripts",
                options_.host, options_.port);
    return next;
  }

  void send_adjust(const std::shared_ptr<std::vector<std::string>>& args, Via via) {
    redis::address(*args, redis::Script::adjust, via, scripts_);
    const auto deadline = Clock::now() + options_.timeout * 4;
    redis::load_library_for(*conn_, via, scripts_, deadline);
    std::vector<std::string_view> views(args->begin(), args->end());
    conn_->command(views, deadline,
                   [this, args, via, alive = std::weak_ptr<RedisStore*>(alive_)](
                       const redisReply* r, redis::CommandStatus s) {
                     if (s != redis::CommandStatus::ok || !alive.lock()) return;
                     if (auto again = redis::resend_via(r, via))
                       send_adjust(args, remember(*again));
                   });
  }

  void fail_all(const Batch& batch, StoreError e) {
    for (const auto& call : batch.calls) {
      if (call->done) continue;
      breaker_->failed(e);
      finish(call, e);
    }
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
  redis::Scripts scripts_;
  redis::ServerWay way_;
  std::shared_ptr<redis::SentinelLocator> sentinels_;  // null without Sentinel
  std::shared_ptr<redis::Connection> conn_;
  std::shared_ptr<redis::Breaker> breaker_;
  std::deque<std::shared_ptr<Call>> queue_;  // waiting for this loop turn's flush
  bool flush_posted_ = false;
  std::shared_ptr<RedisStore*> alive_;  // posted flushes hold it weakly
};

}  // namespace

std::unique_ptr<LimitStore> make_redis_store(asio::io_context& ioc, RedisStoreOptions options,
                                             spdlog::logger& log) {
  return std::make_unique<RedisStore>(ioc, std::move(options), log);
}

}  // namespace floodgate::store
