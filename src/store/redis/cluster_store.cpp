// The Redis Cluster store: each script goes to the master owning its keys' slot. All of one
// limit's keys share a hash tag, so a limit is decided on one node; a request whose limits
// land in different slots is decided slot by slot in ascending slot order, and a later
// refusal refunds what earlier slots charged (all-or-nothing, as on one Redis). A crash of
// this instance between a charge and its refund leaves that charge in place: the caller is
// counted once too often, never let through too often.
//
// Each master has its own breaker: a stalled or dead master costs the timeout of a few
// decisions, then its slots fail at once (the route's on_store_error) until it answers again,
// while the other masters' slots are decided as usual. Redirect chains are bounded everywhere
// (MOVED to itself must not become a command storm), and node names from replies are parsed
// as input (node_address.hpp).
#include <hiredis/hiredis.h>
#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <array>
#include <map>

#include "floodgate/store/redis_store.hpp"
#include "store/redis/breaker.hpp"
#include "store/redis/node_address.hpp"
#include "store/redis/redis_connection.hpp"
#include "store/redis/script_calls.hpp"
#include "store/redis/scripts.hpp"

namespace floodgate::store {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kSlots = redis::kClusterSlots;
constexpr int kMaxRedirects = 3;
// Node names arrive in replies: a hostile node could name a new one in every MOVED, and each
// costs a connection per worker for the life of the process. Clusters have tens of masters.
constexpr std::size_t kMaxNodes = 256;

struct Group {
  int slot = 0;
  std::vector<std::size_t> index;  // into the call's items
  std::vector<Item> items;         // those items, as the script gets them
  limit::Micros now = 0;           // the owning node's TIME when it decided
};

struct Node {
  std::shared_ptr<redis::Connection> conn;
  std::shared_ptr<redis::Breaker> breaker;
  bool owns_slots = false;  // in the current slot map: only such nodes count for health
  redis::ServerWay way;     // scripts once it has shown it runs no functions
  bool usable() const { return conn->connected() && !breaker->open(); }
};

class ClusterStore final : public LimitStore {
 public:
  ClusterStore(asio::io_context& ioc, RedisStoreOptions options, spdlog::logger& log)
      : ioc_(ioc),
        options_(std::move(options)),
        log_(log),
        scripts_(redis::Scripts::compute(options_.test_time.library)),
        timer_(ioc) {
    owners_.fill(nullptr);
    for (const auto& seed : options_.seeds)
      if (auto address = redis::parse_node_address(seed))
        node(*address);
      else
        log_.error("redis cluster: seed {} is not host:port; ignored", seed);
    schedule_refresh(std::chrono::milliseconds(20));
  }

  ~ClusterStore() override {
    timer_.cancel();
    for (auto& [name, n] : nodes_) n.breaker->stop();
    for (auto& [name, n] : nodes_) n.conn->stop();
  }

  bool healthy() const override { return mapped_.load() && unhealthy_nodes_.load() == 0; }

  void async_acquire(std::vector<Item> items, Handler handler) override {
    auto call = std::make_shared<Call>(std::move(items), std::move(handler));
    call->deadline = Clock::now() + options_.timeout;
    call->outcome.admitted = true;
    call->outcome.decisions.resize(call->items.size());
    if (!mapped_) return finish(call, StoreError::unavailable);
    std::map<int, Group> by_slot;  // ordered: every instance charges slots in the same order
    for (std::size_t i = 0; i < call->items.size(); ++i) {
      int slot = redis::key_slot(call->items[i].key);
      by_slot[slot].slot = slot;
      by_slot[slot].index.push_back(i);
    }
    for (auto& [slot, g] : by_slot) {
      for (auto i : g.index) g.items.push_back(call->items[i]);
      call->groups.push_back(std::move(g));
    }
    next_group(call);
  }

  void adjust(const Item& item, std::int64_t delta) override {
    send_fire_and_forget(owner(redis::key_slot(item.key)),
                         redis::adjust_args(item, delta, scripts_, redis::Via::fcall,
                                            redis::now_arg(options_.test_time.clock)),
                         true);
  }

  void release(const Item& item) override {
    send_fire_and_forget(owner(redis::key_slot(item.key)), {"ZREM", item.key, item.lease}, false);
  }

  void reset(const Item& item) override {  // the state key only, as RedisStore's
    send_fire_and_forget(owner(redis::key_slot(item.key)), {"DEL", item.key}, false);
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
    // One budget for the whole decision: every slot group, redirect and NOSCRIPT retry.
    Clock::time_point deadline;
    bool done = false;
  };

  // The node of that name, connecting to it first if it is new; null past kMaxNodes.
  Node* node(const redis::NodeAddress& address) {
    auto name = address.name();
    auto it = nodes_.find(name);
    if (it != nodes_.end()) return &it->second;
    if (nodes_.size() >= kMaxNodes) {
      if (refused_nodes_++ % 64 == 0)
        log_.error("redis cluster: more than {} nodes named; {} refused (last: {})", kMaxNodes,
                   refused_nodes_, name);
      return nullptr;
    }
    redis::ConnectionOptions c;
    c.host = address.host;
    c.port = address.port;
    c.access = options_.access;
    auto conn = std::make_shared<redis::Connection>(ioc_, c, log_);
    auto breaker = std::make_shared<redis::Breaker>(ioc_, conn, redis::breaker_options(options_),
                                                    log_, name, [this] { update_health(); });
    auto& n = nodes_.emplace(name, Node{conn, breaker}).first->second;
    conn->start();
    return &n;
  }

  Node* owner(int slot) { return owners_[static_cast<std::size_t>(slot)]; }

  // Atomic, for the admin thread: masters of the current map whose breaker is open.
  void update_health() {
    int unhealthy = 0;
    for (const auto& [name, n] : nodes_) unhealthy += n.owns_slots && n.breaker->open() ? 1 : 0;
    unhealthy_nodes_ = unhealthy;
  }

  void next_group(const std::shared_ptr<Call>& call) {
    if (call->next == call->groups.size()) return finish(call, call->outcome);
    send_group(call, owner(call->groups[call->next].slot), std::nullopt, false, 0);
  }

  // `via`: how to call the script (a resend after a missing library or script); by default
  // the node's way.
  void send_group(const std::shared_ptr<Call>& call, Node* n, std::optional<redis::Via> via,
                  bool asking, int redirects) {
    const auto& g = call->groups[call->next];
    if (!n || !n->conn->connected()) {
      request_refresh();
      return failed(call, StoreError::unavailable, n);
    }
    if (n->breaker->open()) return failed(call, StoreError::unavailable, nullptr);  // fast
    // Spent on earlier groups or hops: not this node's failure.
    if (Clock::now() >= call->deadline) return failed(call, StoreError::timeout, nullptr);
    const auto deadline = call->deadline;
    const auto how = via.value_or(n->way.via);
    prepare(n, how, asking, deadline);
    auto args = redis::acquire_args(g.items, scripts_, how,
                                    redis::now_arg(options_.test_time.clock), options_.instance_id);
    std::vector<std::string_view> views(args.begin(), args.end());
    bool sent = n->conn->command(
        views, deadline,
        [this, call, n, how, asking, redirects](const redisReply* r, redis::CommandStatus s) {
          try {
            on_group_reply(call, n, r, s, how, asking, redirects);
          } catch (...) {
            // Allocation failure and the like: this decision fails, the loop logs and counts.
            failed(call, StoreError::protocol, n);
            throw;
          }
        });
    if (!sent) failed(call, StoreError::unavailable, n);
  }

  void on_group_reply(const std::shared_ptr<Call>& call, Node* n, const redisReply* r,
                      redis::CommandStatus s, redis::Via via, bool asking, int redirects) {
    if (s == redis::CommandStatus::timeout) return failed(call, StoreError::timeout, n);
    if (s != redis::CommandStatus::ok) {
      request_refresh();
      return failed(call, StoreError::unavailable, n);
    }
    if (auto again = redis::resend_via(r, via))
      return send_group(call, n, remember(n, *again), asking, redirects);  // still ASKING
    if (auto redirect = redis::redirect_of(r)) {
      if (redirects >= kMaxRedirects) {
        log_redirect_loop(*redirect);
        return failed(call, StoreError::protocol, n);
      }
      auto* target = node(redirect->node);
      if (!target) return failed(call, StoreError::protocol, n);
      if (!redirect->ask) {
        owners_[static_cast<std::size_t>(redirect->slot)] = target;
        request_refresh();
      }
      return send_group(call, target, std::nullopt, redirect->ask, redirects + 1);
    }
    auto outcome = redis::decode_outcome(r, call->groups[call->next].items);
    if (!outcome) {
      if (r && r->type == REDIS_REPLY_ERROR)
        log_.error("redis cluster acquire failed: {}", std::string(r->str, r->len));
      return failed(call, StoreError::protocol, n);
    }
    n->breaker->succeeded();
    on_group(call, *outcome);
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
        auto* n = owner(redis::key_slot(item.key));
        switch (item.params.algorithm) {
          case config::Algorithm::concurrency:
            send_fire_and_forget(n, {"ZREM", item.key, item.lease}, false);
            break;
          case config::Algorithm::sliding_log:
            // The log entry the script added, spelled as the script spells it.
            if (item.cost > 0)
              send_fire_and_forget(
                  n,
                  {"ZREM", item.key, redis::log_member(item.lease, call.groups[gi].now, item.cost)},
                  false);
            break;
          default:  // what it took: its cost, or a lease's grant
            send_fire_and_forget(
                n,
                redis::adjust_args(item, -std::max(item.cost, d.granted), scripts_,
                                   redis::Via::fcall, redis::now_arg(options_.test_time.clock)),
                true);
        }
      }
    }
  }

  // Releases, settlements and refunds: nobody waits for them, but a redirect is still followed
  // (MOVED updates the map, ASK is asked once) up to the same bound as a decision's.
  // `script`: args are lua/adjust.lua's, called the node's way unless `via` says otherwise.
  void send_fire_and_forget(Node* n, std::vector<std::string> args, bool script,
                            bool asking = false, int redirects = 0,
                            std::optional<redis::Via> via = std::nullopt) {
    if (!n || !n->usable()) return;
    const auto how = via.value_or(n->way.via);
    if (script) redis::address(args, redis::Script::adjust, how, scripts_);
    auto shared = std::make_shared<std::vector<std::string>>(std::move(args));
    std::vector<std::string_view> views(shared->begin(), shared->end());
    auto deadline = Clock::now() + options_.timeout * 4;
    prepare(n, script ? how : redis::Via::fcall, asking, deadline);
    n->conn->command(views, deadline,
                     [this, n, shared, script, asking, redirects, how](const redisReply* r,
                                                                       redis::CommandStatus s) {
                       if (s != redis::CommandStatus::ok) return;
                       on_fire_and_forget_reply(r, n, shared, script, asking, redirects, how);
                     });
  }

  // What goes before a call on `n`: the library when it is missing there (before ASKING,
  // which only covers the command right after it; "already exists" is as good as loaded).
  void prepare(Node* n, redis::Via via, bool asking, Clock::time_point deadline) {
    redis::load_library_for(*n->conn, via, scripts_, deadline);
    if (asking)
      n->conn->command({"ASKING"}, deadline, [](const redisReply*, redis::CommandStatus) {});
  }

  // A node without functions (Redis < 7, or an ACL without FCALL) gets scripts from now on.
  redis::Via remember(Node* n, redis::Via next) {
    n->way.follow(next);
    return next;
  }

  void on_fire_and_forget_reply(const redisReply* r, Node* n,
                                const std::shared_ptr<std::vector<std::string>>& args, bool script,
                                bool asking, int redirects, redis::Via via) {
    if (script)
      if (auto again = redis::resend_via(r, via))
        return send_fire_and_forget(n, *args, true, asking, redirects, remember(n, *again));
    auto redirect = redis::redirect_of(r);
    if (!redirect) return;
    if (redirects >= kMaxRedirects) return log_redirect_loop(*redirect);
    auto* target = node(redirect->node);
    if (!target) return;
    if (!redirect->ask) {
      owners_[static_cast<std::size_t>(redirect->slot)] = target;
      request_refresh();
    }
    send_fire_and_forget(target, *args, script, redirect->ask, redirects + 1);
  }

  void log_redirect_loop(const redis::Redirect& last) {
    if (redirect_loops_++ % 64 == 0)
      log_.error("redis cluster: more than {} redirects (last: slot {} to {}); {} so far",
                 kMaxRedirects, last.slot, last.node.name(), redirect_loops_);
  }

  // `n`: the node that failed (its breaker counts it), or null when nothing was asked.
  void failed(const std::shared_ptr<Call>& call, StoreError e, Node* n) {
    if (call->done) return;
    // A failure after earlier slots charged: give those back, then follow the route's policy.
    refund(*call, call->next);
    if (n) n->breaker->failed(e);
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
    // Ask the usable nodes in turn, so that one that accepts and never answers is not the
    // only one ever asked; its silence counts on its breaker like a decision's. A periodic
    // refresh also follows failovers nobody reported.
    auto it = nodes_.begin();
    std::advance(it, nodes_.empty() ? 0 : refresh_turn_++ % nodes_.size());
    for (std::size_t k = 0; k < nodes_.size(); ++k, ++it) {
      if (it == nodes_.end()) it = nodes_.begin();
      Node* n = &it->second;
      if (!n->usable()) continue;
      bool sent = n->conn->command(
          {"CLUSTER", "SLOTS"},
          Clock::now() + std::max(options_.timeout, std::chrono::milliseconds(500)),
          [this, n](const redisReply* r, redis::CommandStatus s) {
            if (s == redis::CommandStatus::ok && apply_slots(r)) {
              n->breaker->succeeded();
              return schedule_refresh(std::chrono::milliseconds(2000));
            }
            if (s != redis::CommandStatus::ok)
              n->breaker->failed(s == redis::CommandStatus::timeout ? StoreError::timeout
                                                                    : StoreError::unavailable);
            schedule_refresh(std::chrono::milliseconds(200));
          });
      if (sent) return;
    }
    schedule_refresh(std::chrono::milliseconds(100));
  }

  // A map is applied only when it covers every slot, and only then are its nodes connected to.
  bool apply_slots(const redisReply* r) {
    auto ranges = redis::slot_ranges_of(r);
    std::vector<bool> seen(kSlots, false);
    int covered = 0;
    for (const auto& range : ranges)
      for (int s = range.from; s <= range.to; ++s)
        if (!seen[static_cast<std::size_t>(s)]) seen[static_cast<std::size_t>(s)] = true, ++covered;
    if (covered != kSlots) return false;
    std::array<Node*, kSlots> owners{};
    for (const auto& range : ranges) {
      auto* n = node(range.node);
      if (!n) return false;
      for (int s = range.from; s <= range.to; ++s) owners[static_cast<std::size_t>(s)] = n;
    }
    owners_ = owners;
    for (auto& [name, n] : nodes_) n.owns_slots = false;
    for (auto* n : owners_) n->owns_slots = true;
    update_health();
    mapped_ = true;
    return true;
  }

  asio::io_context& ioc_;
  RedisStoreOptions options_;
  spdlog::logger& log_;
  redis::Scripts scripts_;
  asio::steady_timer timer_;
  std::map<std::string, Node> nodes_;  // by NodeAddress::name(); never erased (owners_ points in)
  std::array<Node*, kSlots> owners_;
  bool refresh_pending_ = false;
  int failures_ = 0;
  std::uint64_t redirect_loops_ = 0;
  std::uint64_t refused_nodes_ = 0;
  std::size_t refresh_turn_ = 0;         // which node a refresh asks first
  std::atomic<bool> mapped_{false};      // read by the admin thread
  std::atomic<int> unhealthy_nodes_{0};  // read by the admin thread
};

}  // namespace

std::unique_ptr<LimitStore> make_redis_cluster_store(asio::io_context& ioc,
                                                     RedisStoreOptions options,
                                                     spdlog::logger& log) {
  return std::make_unique<ClusterStore>(ioc, std::move(options), log);
}

}  // namespace floodgate::store
