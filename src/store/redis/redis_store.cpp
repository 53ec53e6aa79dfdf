#include "floodgate/store/redis_store.hpp"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <charconv>

#include "store/redis/redis_connection.hpp"
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

std::string number(double v) {
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, p);
}

bool is_noscript(const redisReply* r) {
  return r && r->type == REDIS_REPLY_ERROR && std::string_view(r->str, r->len).starts_with("NOSCRIPT");
}

// {all_admitted, now, (admitted, remaining, reset_after, retry_after, limit) per item}
std::optional<Outcome> decode(const redisReply* r, std::size_t items) {
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 + 5 * items) return std::nullopt;
  for (std::size_t i = 0; i < r->elements; ++i)
    if (r->element[i]->type != REDIS_REPLY_INTEGER) return std::nullopt;
  auto at = [&](std::size_t i) { return static_cast<std::int64_t>(r->element[i]->integer); };
  Outcome out;
  out.admitted = at(0) == 1;
  out.now = at(1);
  for (std::size_t i = 0; i < items; ++i) {
    limit::Decision d;
    std::size_t b = 2 + 5 * i;
    d.admitted = at(b) == 1;
    d.remaining = at(b + 1);
    d.reset_after = at(b + 2);
    d.retry_after = at(b + 3);
    d.limit = at(b + 4);
    out.decisions.push_back(d);
  }
  return out;
}

class RedisStore final : public LimitStore, public RedisHealth {
 public:
  RedisStore(asio::io_context& ioc, RedisStoreOptions options, spdlog::logger& log)
      : ioc_(ioc),
        options_(std::move(options)),
        log_(log),
        acquire_sha_(redis::sha1_hex(redis::acquire_script())),
        adjust_sha_(redis::sha1_hex(redis::adjust_script())),
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
    if (open_ || !conn_->connected()) return;  // best effort: a lost settlement errs neither way for long
    auto args = std::make_shared<std::vector<std::string>>(std::vector<std::string>{
        "EVALSHA", adjust_sha_, "1", item.key, now_arg(),
        std::to_string(static_cast<int>(item.params.algorithm)), std::to_string(item.params.capacity),
        number(item.params.per_second), std::to_string(item.params.window), std::to_string(delta)});
    send_simple(args, true);
  }

  void release(const Item& item) override {
    if (!conn_->connected()) return;  // the lease expires by itself
    auto args = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"ZREM", item.key, item.lease});
    send_simple(args, false);
  }

 private:
  struct Call {
    std::vector<Item> items;
    Handler handler;
    bool done = false;
  };

  std::string now_arg() const {
    return options_.test_clock ? std::to_string(options_.test_clock->now()) : std::string();
  }

  std::vector<std::string> acquire_args(const Call& call, bool use_eval) const {
    std::vector<std::string> a;
    a.reserve(5 + call.items.size() * 7);
    a.emplace_back(use_eval ? "EVAL" : "EVALSHA");
    a.emplace_back(use_eval ? std::string(redis::acquire_script()) : acquire_sha_);
    a.push_back(std::to_string(call.items.size()));
    for (const auto& i : call.items) a.push_back(i.key);
    a.push_back(now_arg());
    std::string lease;
    for (const auto& i : call.items)
      if (!i.lease.empty()) lease = i.lease;
    a.push_back(lease.empty() ? options_.instance_id : lease);
    for (const auto& i : call.items) {
      a.push_back(std::to_string(static_cast<int>(i.params.algorithm)));
      a.push_back(std::to_string(i.params.capacity));
      a.push_back(number(i.params.per_second));
      a.push_back(std::to_string(i.params.window));
      a.push_back(std::to_string(i.cost));
      a.emplace_back(i.enforce ? "1" : "0");
    }
    return a;
  }

  void send(const std::shared_ptr<Call>& call, bool use_eval) {
    auto args = acquire_args(*call, use_eval);
    std::vector<std::string_view> views(args.begin(), args.end());
    bool sent = conn_->command(views, Clock::now() + options_.timeout,
                               [this, call, use_eval](const redisReply* r, redis::CommandStatus s) {
                                 on_acquire_reply(call, r, s, use_eval);
                               });
    if (!sent) finish(call, StoreError::unavailable);
  }

  void on_acquire_reply(const std::shared_ptr<Call>& call, const redisReply* r, redis::CommandStatus s,
                        bool used_eval) {
    if (s == redis::CommandStatus::timeout) return failed(call, StoreError::timeout);
    if (s != redis::CommandStatus::ok) return failed(call, StoreError::unavailable);
    if (is_noscript(r) && !used_eval) return send(call, true);  // script cache flushed: once more
    auto outcome = decode(r, call->items.size());
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
    asio::post(ioc_, [call, r = std::move(result)]() mutable { std::move(call->handler)(std::move(r)); });
  }

  void open_breaker(StoreError cause) {
    open_ = true;
    log_.warn("redis {}:{}: {} consecutive failures (last: {}); failing fast and probing every {} ms",
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
      bool sent = conn_->command(ping, Clock::now() + std::max(options_.timeout, std::chrono::milliseconds(200)),
                                 [this](const redisReply* r, redis::CommandStatus s) {
                                   if (s == redis::CommandStatus::ok && r && r->type != REDIS_REPLY_ERROR) {
                                     open_ = false;
                                     failures_ = 0;
                                     log_.info("redis {}:{}: answering again; limits enforced by Redis",
                                               options_.host, options_.port);
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
  std::string acquire_sha_;
  std::string adjust_sha_;
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
