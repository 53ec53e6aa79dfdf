// The Redis Cluster store: each script goes to the master owning its keys' slot. All of one
// limit's keys share a hash tag, so a limit is decided on one node; a request whose limits
// land in different slots is decided slot by slot in ascending slot order, and a later
// refusal refunds what earlier slots charged (all-or-nothing, as on one Redis). A crash of
// this instance between a charge and its refund leaves that charge in place: the caller is
// counted once too often, never let through too often.
#include <hiredis/hiredis.h>
#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <array>
#include <map>

#include "floodgate/store/redis_store.hpp"
#include "store/redis/redis_connection.hpp"
#include "store/redis/script_calls.hpp"
#include "store/redis/scripts.hpp"

namespace floodgate::store {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kSlots = redis::kClusterSlots;
constexpr int kMaxRedirects = 3;

struct Group {
  int slot = 0;
  std::vector<std::size_t> index;  // into the call's items
  limit::Micros now = 0;           // the owning node's TIME when it decided
};

class ClusterStore final : public LimitStore, public RedisHealth {
 public:
  ClusterStore(asio::io_context& ioc, RedisStoreOptions options, spdlog::logger& log)
      : ioc_(ioc),
        options_(std::move(options)),
        log_(log),
        shas_(redis::ScriptShas::compute()),
        timer_(ioc) {
    for (const auto& seed : options_.seeds) node(seed);
    schedule_refresh(std::chrono::milliseconds(20));
  }

  ~ClusterStore() override {
    timer_.cancel();
    for (auto& [name, c] : nodes_) c->stop();
  }

  bool healthy() const override { return mapped_.load() && !open_.load(); }

  void async_acquire(std::vector<Item> items, Handler handler) override {
    auto call = std::make_shared<Call>(std::move(items), std::move(handler));
    call->outcome.admitted = true;
    call->outcome.decisions.resize(call->items.size());
    if (open_ || !mapped_) return finish(call, StoreError::unavailable);
    std::map<int, Group> by_slot;  // ordered: every instance charges slots in the same order
    for (std::size_t i = 0; i < call->items.size(); ++i) {
      int slot = redis::key_slot(call->items[i].key);
      by_slot[slot].slot = slot;
      by_slot[slot].index.push_back(i);
    }
    for (auto& [slot, g] : by_slot) call->groups.push_back(std::move(g));
    next_group(call);
  }

  void adjust(const Item& item, std::int64_t delta) override {
    send_fire_and_forget(
        redis::key_slot(item.key),
        redis::adjust_args(item, delta, shas_, redis::now_arg(options_.test_clock)), true);
  }

  void release(const Item& item) override {
    send_fire_and_forget(redis::key_slot(item.key), {"ZREM", item.key, item.lease}, false);
  }

 private:
  struct Call {
    // (Constructed, never assigned: assigning an any_completion_handler from a handler wraps
    // it in another one, recursively.)
    Call(std::vector<Item> i, Handler h) : items(std::move(i)), handler(std::move(h)) {}
    std::vector<Item> items;
    Handler handler;
    std::vector<Group> groups;
    std::size_t next = 0;
    Outcome outcome;
    bool done = false;
  };

  std::shared_ptr<redis::Connection> node(const std::string& name) {
    auto it = nodes_.find(name);
    if (it != nodes_.end()) return it->second;
    redis::ConnectionOptions c;
    auto colon = name.rfind(':');
    c.host = name.substr(0, colon);
    c.port = static_cast<std::uint16_t>(std::stoi(name.substr(colon + 1)));
    c.username = options_.username;
    c.password = options_.password;
    auto conn = std::make_shared<redis::Connection>(ioc_, c, log_);
    conn->start();
    nodes_.emplace(name, conn);
    return conn;
  }

  std::shared_ptr<redis::Connection> owner(int slot) {
    const auto& name = owners_[static_cast<std::size_t>(slot)];
    return name.empty() ? nullptr : node(name);
  }

  void next_group(const std::shared_ptr<Call>& call) {
    if (call->next == call->groups.size()) return finish(call, call->outcome);
    send_group(call, owner(call->groups[call->next].slot), false, false, 0);
  }

  void send_group(const std::shared_ptr<Call>& call, std::shared_ptr<redis::Connection> conn,
                  bool use_eval, bool asking, int redirects) {
    const auto& g = call->groups[call->next];
    std::vector<Item> items;
    for (auto i : g.index) items.push_back(call->items[i]);
    if (!conn || !conn->connected()) {
      request_refresh();
      return failed(call, StoreError::unavailable);
    }
    auto deadline = Clock::now() + options_.timeout;
    if (asking) conn->command({"ASKING"}, deadline, [](const redisReply*, redis::CommandStatus) {});
    auto args = redis::acquire_args(items, shas_, use_eval, redis::now_arg(options_.test_clock),
                                    options_.instance_id);
    std::vector<std::string_view> views(args.begin(), args.end());
    bool sent = conn->command(
        views, deadline,
        [this, call, conn, use_eval, asking, redirects](const redisReply* r,
                                                        redis::CommandStatus s) {
          if (s == redis::CommandStatus::timeout) return failed(call, StoreError::timeout);
          if (s != redis::CommandStatus::ok) {
            request_refresh();
            return failed(call, StoreError::unavailable);
          }
          if (redis::is_noscript(r) && !use_eval)
            return send_group(call, conn, true, asking, redirects);  // still ASKING if it was
          if (auto redirect = redis::redirect_of(r)) {
            if (redirects >= kMaxRedirects) return failed(call, StoreError::protocol);
            if (!redirect->ask) {
              owners_[static_cast<std::size_t>(redirect->slot)] = redirect->node;
              request_refresh();
            }
            return send_group(call, node(redirect->node), use_eval, redirect->ask, redirects + 1);
          }
          auto outcome = redis::decode_outcome(r, call->groups[call->next].index.size());
          if (!outcome) {
            if (r && r->type == REDIS_REPLY_ERROR)
              log_.error("redis cluster acquire failed: {}", std::string(r->str, r->len));
            return failed(call, StoreError::protocol);
          }
          failures_ = 0;
          on_group(call, *outcome);
        });
    if (!sent) failed(call, StoreError::unavailable);
  }

  void on_group(const std::shared_ptr<Call>& call, const Outcome& group) {
    auto& g = call->groups[call->next];
    for (std::size_t k = 0; k < g.index.size(); ++k)
      call->outcome.decisions[g.index[k]] = group.decisions[k];
    if (call->outcome.now == 0) call->outcome.now = group.now;
    if (!group.admitted) {
      call->outcome.admitted = false;
      refund(*call, call->next);  // earlier slots charged; this one charged nothing
      return finish(call, call->outcome);
    }
    g.now = group.now;
    ++call->next;
    next_group(call);
  }

  // Returns what the groups before `upto` charged: the all-or-nothing promise across slots.
  void refund(const Call& call, std::size_t upto) {
    for (std::size_t gi = 0; gi < upto; ++gi) {
      for (auto i : call.groups[gi].index) {
        const auto& item = call.items[i];
        const auto& d = call.outcome.decisions[i];
        if (!d.admitted) continue;
        int slot = redis::key_slot(item.key);
        switch (item.params.algorithm) {
          case config::Algorithm::concurrency:
            send_fire_and_forget(slot, {"ZREM", item.key, item.lease}, false);
            break;
          case config::Algorithm::sliding_log:
            // The log entry the script added: "<lease>:<now>:<cost>" (now: that node's TIME).
            if (item.cost > 0)
              send_fire_and_forget(slot,
                                   {"ZREM", item.key,
                                    item.lease + ":" + std::to_string(call.groups[gi].now) + ":" +
                                        std::to_string(item.cost)},
                                   false);
            break;
          default:
            send_fire_and_forget(
                slot,
                redis::adjust_args(item, -item.cost, shas_, redis::now_arg(options_.test_clock)),
                true);
        }
      }
    }
  }

  void send_fire_and_forget(int slot, std::vector<std::string> args, bool script) {
    auto conn = owner(slot);
    if (!conn || !conn->connected()) return;
    auto shared = std::make_shared<std::vector<std::string>>(std::move(args));
    std::vector<std::string_view> views(shared->begin(), shared->end());
    conn->command(views, Clock::now() + options_.timeout * 4,
                  [this, shared, script, slot](const redisReply* r, redis::CommandStatus s) {
                    if (s != redis::CommandStatus::ok) return;
                    if (script && redis::is_noscript(r)) {
                      (*shared)[0] = "EVAL";
                      (*shared)[1] = std::string(redis::adjust_script());
                      send_fire_and_forget(slot, *shared, false);
                    } else if (auto redirect = redis::redirect_of(r); redirect && !redirect->ask) {
                      owners_[static_cast<std::size_t>(redirect->slot)] = redirect->node;
                      send_fire_and_forget(slot, *shared, script);
                    }
                  });
  }

  void failed(const std::shared_ptr<Call>& call, StoreError e) {
    // A failure after earlier slots charged: give those back, then follow the route's policy.
    // No cluster-wide breaker: one dead master must not fail the slots of the others. A dead
    // node's connection is down, so its slots fail at once (no deadline paid) until the slot
    // map names its replacement.
    refund(*call, call->next);
    if (++failures_ % 64 == 1)
      log_.warn("redis cluster: decision failed ({}); {} failures so far", to_string(e), failures_);
    finish(call, e);
  }

  void finish(const std::shared_ptr<Call>& call, AcquireResult result) {
    if (call->done) return;
    call->done = true;
    asio::post(ioc_,
               [call, r = std::move(result)]() mutable { std::move(call->handler)(std::move(r)); });
  }

  // ---- the slot map ------------------------------------------------------------------

  void request_refresh() {
    if (!refresh_pending_) schedule_refresh(std::chrono::milliseconds(100));
  }

  void schedule_refresh(std::chrono::milliseconds after) {
    refresh_pending_ = true;
    timer_.expires_after(after);
    timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      refresh_pending_ = false;
      refresh();
    });
  }

  void refresh() {
    // Ask any connected node; a periodic refresh also follows failovers nobody reported.
    for (auto& [name, conn] : nodes_) {
      if (!conn->connected()) continue;
      bool sent = conn->command(
          {"CLUSTER", "SLOTS"},
          Clock::now() + std::max(options_.timeout, std::chrono::milliseconds(500)),
          [this](const redisReply* r, redis::CommandStatus s) {
            if (s == redis::CommandStatus::ok && apply_slots(r)) {
              if (open_)
                log_.info("redis cluster: slot map answering again; limits enforced by Redis");
              open_ = false;
              failures_ = 0;
              schedule_refresh(std::chrono::milliseconds(mapped_ ? 2000 : 100));
            } else {
              schedule_refresh(std::chrono::milliseconds(200));
            }
          });
      if (sent) return;
    }
    schedule_refresh(std::chrono::milliseconds(100));
  }

  bool apply_slots(const redisReply* r) {
    int covered = 0;
    for (const auto& range : redis::slot_ranges_of(r)) {
      node(range.node);
      for (int s = range.from; s <= range.to; ++s)
        owners_[static_cast<std::size_t>(s)] = range.node, ++covered;
    }
    mapped_ = covered == kSlots;
    return mapped_;
  }

  asio::io_context& ioc_;
  RedisStoreOptions options_;
  spdlog::logger& log_;
  redis::ScriptShas shas_;
  asio::steady_timer timer_;
  std::map<std::string, std::shared_ptr<redis::Connection>> nodes_;
  std::array<std::string, kSlots> owners_;
  bool refresh_pending_ = false;
  int failures_ = 0;
  std::atomic<bool> open_{false};  // read by the admin thread
  std::atomic<bool> mapped_{false};
};

}  // namespace

std::unique_ptr<LimitStore> make_redis_cluster_store(asio::io_context& ioc,
                                                     RedisStoreOptions options,
                                                     spdlog::logger& log) {
  return std::make_unique<ClusterStore>(ioc, std::move(options), log);
}

}  // namespace floodgate::store
