#pragma once
// Per-caller overrides set at run time through the admin API (PUT /overrides/LIMIT/CALLER):
// a quota of the caller's own, or an exemption, on every route's limit of that name, for a
// while or until removed. An OverrideBoard holds the instance's current list; with a Redis
// store the list is kept in Redis and every instance sharing it reads it again within a
// second (app/override_sync.hpp), so a change made on one instance reaches all of them.

#include <boost/json/object.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "floodgate/config/config.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/limit/policy.hpp"

namespace floodgate::limit {

struct CallerOverride {
  std::string limit;       // the limit's name
  std::string caller;      // the caller as /top shows it: `ip=203.0.113.7`
  std::int64_t quota = 0;  // > 0: the caller's own capacity (or limit); 0 when exempt
  bool exempt = false;     // the limit does not apply to the caller at all
  Micros until = 0;        // Unix microseconds when it lapses; 0: never
  std::string by;          // the admin token's name that set it
  Micros at = 0;           // when it was set
  bool live(Micros now) const { return until == 0 || now < until; }
};
using OverrideList = std::vector<CallerOverride>;

// One override as JSON ({"limit":..,"key":..,"quota":N | "exempt":true,"until":..,"by":..}),
// the form GET /overrides lists, Redis keeps and `floodgate replay --overrides` reads.
boost::json::object to_json_object(const CallerOverride& o);
std::string to_json(const CallerOverride& o);
std::string to_json(const OverrideList& list);  // {"overrides":[...]}
// Parsing returns an error text instead of throwing (a Redis reply, a file).
std::optional<CallerOverride> override_from_json(std::string_view text, std::string& why);
std::optional<OverrideList> overrides_from_json(std::string_view text, std::string& why);

// The overrides by store key under one config (keys depend on its routes and key secret):
// what a worker, and the replay, look each request's keys up in.
class OverrideIndex {
 public:
  void build(const config::Config& c, const OverrideList& list, keys::KeyHasher& hasher);
  const CallerOverride* find(const std::string& key, Micros now) const;
  bool empty() const { return by_key_.empty(); }
  const std::unordered_map<std::string, const CallerOverride*>& keys() const { return by_key_; }
  // Exempt items leave the plan; a quota replaces the item's own, refilled over the same
  // time, and is decided exactly (a lease's terms are the limit's, not the caller's).
  void apply(Plan& plan, Micros now) const;

 private:
  std::unordered_map<std::string, const CallerOverride*> by_key_;
};

// `p` with the caller's quota instead of its own.
Params with_quota(Params p, std::int64_t quota);

// Where the admin API keeps overrides: the board itself (the memory store: one instance), or
// Redis (app/override_sync.hpp), from which every instance's board is filled.
class OverrideKeeper {
 public:
  virtual ~OverrideKeeper() = default;
  // "" when done, else why not (the store did not answer).
  virtual std::string put(const CallerOverride& o) = 0;
  // `found`: whether there was one to remove.
  virtual std::string remove(const std::string& limit, const std::string& caller, bool& found) = 0;
  // A store key was reset here: the other instances' deny caches must forget it too.
  virtual std::string reset(const std::string& store_key) {
    (void)store_key;
    return "";
  }
};

class OverrideBoard {
 public:
  // `resets`: store keys reset lately through any instance, for the deny caches to forget.
  void publish(OverrideList list, std::vector<std::string> resets = {}) {
    auto next = std::make_shared<const OverrideList>(std::move(list));
    auto next_resets = std::make_shared<const std::vector<std::string>>(std::move(resets));
    std::lock_guard lock(mutex_);
    current_.swap(next);
    resets_.swap(next_resets);
    version_.fetch_add(1, std::memory_order_release);
  }
  std::shared_ptr<const OverrideList> get() const {
    std::lock_guard lock(mutex_);
    return current_;
  }
  std::shared_ptr<const std::vector<std::string>> resets() const {
    std::lock_guard lock(mutex_);
    return resets_;
  }
  // Changes with every publish: a worker reads the list again only then.
  std::uint64_t version() const { return version_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const OverrideList> current_ = std::make_shared<const OverrideList>();
  std::shared_ptr<const std::vector<std::string>> resets_ =
      std::make_shared<const std::vector<std::string>>();
  std::atomic<std::uint64_t> version_{0};
};

// The keeper of a single instance (the memory store): changes go straight to its board.
class BoardKeeper final : public OverrideKeeper {
 public:
  explicit BoardKeeper(OverrideBoard& board) : board_(board) {}
  std::string put(const CallerOverride& o) override;
  std::string remove(const std::string& limit, const std::string& caller, bool& found) override;

 private:
  std::mutex mutex_;  // one change at a time: each publishes the list it read, changed
  OverrideBoard& board_;
};

}  // namespace floodgate::limit
