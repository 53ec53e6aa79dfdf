#pragma once
// Leased decisions (SPEC "Leased decisions"): a limit with `lease` is decided in the instance
// from units taken from the store in advance, so a hot key or a far store costs no round trip
// per request. Nothing is admitted without a unit the store gave up atomically, with its own
// clock: a lease can refuse early (the units another instance holds), never admit more.
//
// LeaseBook: the units in hand, per store key, for the whole instance. Every worker spends from
// the same book, so an instance holds at most about `size` units of a key and the bound the
// config publishes (config::LeaseSettings::early_refusal_bound) holds whatever the number of
// workers.
// LeasedStore (make_leased_store): a worker's LimitStore that decides leased items from the book
// and hands everything else, and every grant, to the worker's own store.

#include <boost/asio/io_context.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "floodgate/limit/clock.hpp"
#include "floodgate/store/limit_store.hpp"

namespace floodgate::store {

class LeaseBook {
 public:
  // Units that go back to the store (their ttl passed, their limit changed, a drain).
  struct GiveBack {
    Item item;  // key and parameters, as the store charged them
    std::int64_t units = 0;
  };
  using GiveBacks = std::vector<GiveBack>;

  // What a request found in hand for one leased item.
  struct Take {
    bool local = false;         // admitted from units in hand: `decision` says so
    limit::Decision decision;   // local only
    std::int64_t top_up = 0;    // local: ask the store for this many more (now pending)
    std::int64_t reserved = 0;  // not local: units taken from hand towards the cost
    std::int64_t spare = 0;     // not local: units the store may add to the hand (now pending)
    std::int64_t settled = 0;   // spent units to report with the grant (top-up or not local)
    bool wait = false;          // not enough in hand, units on their way: `wake` runs when
                                // they land (or do not); take again then
  };
  // Called, on whichever worker's thread a grant lands, for each request waiting for it.
  using Wake = std::function<void()>;

  LeaseBook();  // with a random holder id
  // This instance's name in the store's record of who holds what (lua/prelude.lua).
  const std::string& holder() const { return holder_; }

  // Takes `item.cost` units from hand, or says what to ask the store for. With `may_wait`, a
  // request that finds the hand short while units are on their way is told to wait for them
  // (`wait`) instead of asking again: what an instance has asked for must not make it refuse
  // its own callers, only the other instances'.
  Take take(const Item& item, limit::Micros now, GiveBacks& back, bool may_wait = false);
  // Registers `wake` for when what is on its way lands; false (and nothing registered) when
  // it already has.
  bool await(const Item& item, Wake wake);
  // A grant's answer (null: the store failed). `need` of the granted units were the asking
  // request's; the rest goes into the hand. `sent` is when it was asked (local time) and
  // `store_now` the store's clock at the grant. Fills `decision` for the asking request.
  // `settled`: what the grant reported (counted again when it failed).
  // Returns the requests to wake (call them outside any lock of the caller's).
  std::vector<Wake> granted(const Item& item, std::int64_t need, std::int64_t spare,
                            std::int64_t settled, const limit::Decision* answer, limit::Micros sent,
                            limit::Micros store_now, limit::Micros now, limit::Decision& decision,
                            GiveBacks& back);
  // Units of a request refused by another limit (or failed) go back into the hand, not to the
  // store; into the store only when the hand is gone.
  void put_back(const Item& item, std::int64_t units, limit::Micros now, GiveBacks& back);
  // Units whose ttl passed; leases idle for a ttl are forgotten. True while any lease is kept.
  bool sweep(limit::Micros now, GiveBacks& back);
  // Drain: every unit in hand goes back, and from now on grants are for one request only.
  void close(limit::Micros now, GiveBacks& back);
  // A reload whose leased limits are described by `leased`: when that differs from what the
  // book last saw, every unit in hand goes back (a limit's definition changed, or it is no
  // longer leased, and the exact path does not know what leases hold).
  void reconfigure(const std::string& leased, limit::Micros now, GiveBacks& back);

  std::size_t size() const;                                               // leases kept (tests)
  std::int64_t in_hand(const std::string& key, limit::Micros now) const;  // (tests)
  std::int64_t asked(const std::string& key) const;  // units asked for, not answered (tests)

 private:
  struct Lease {
    limit::Params params;
    std::int64_t size = 0;
    limit::Micros ttl = 0;
    metrics::LeaseCounters* counters = nullptr;
    std::int64_t units = 0;        // in hand
    std::int64_t spent = 0;        // taken from the store and spent, not reported yet
    std::int64_t pending = 0;      // asked for, not answered yet
    limit::Micros expires = 0;     // the units in hand go back then
    limit::Micros window_end = 0;  // windows: the units are void from then; 0: not a window
    limit::Decision last;          // the store's answer to the last grant
    limit::Micros last_at = 0;     // when it came (local time)
    std::vector<Wake> waiting;     // requests waiting for what is pending
  };
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, Lease> leases;
  };
  static constexpr std::size_t kShards = 16;
  Shard& shard_of(const std::string& key);
  const Shard& shard_of(const std::string& key) const;
  static bool same_terms(const Lease& l, const Item& item);
  // The key's lease when it is under `item`'s terms (null: none, or other terms).
  static Lease* current(Shard& shard, const Item& item);
  // Whether a lease's units are worth returning at `now`: not those of a window about to end.
  static bool worth_returning(const Lease& l, limit::Micros now);
  // Takes the units out of `l` that have run out by `now`, into `back` when worth returning.
  void expire(const std::string& key, Lease& l, limit::Micros now, GiveBacks& back) const;
  // Units back to the store; with `report`, the lease is still in the store's record and the
  // units spent from it are reported too (none of it is held any more).
  void give(const std::string& key, Lease& l, std::int64_t units, bool report,
            GiveBacks& back) const;
  // `units` of `item` back to the store, reporting `settled` spent ones; `returning`: the
  // units are in the store's record of what this holder holds.
  GiveBack returned(Item item, std::int64_t units, std::int64_t settled, bool returning) const;
  static limit::Decision local_decision(const Lease& l, std::int64_t cost, limit::Micros now);
  void return_all(limit::Micros now, GiveBacks& back);

  std::array<Shard, kShards> shards_;
  std::atomic<bool> closed_{false};
  std::string holder_;
  std::mutex definition_mutex_;
  std::optional<std::string> definition_;  // the leased limits last seen
};

// `inner`: the worker's store (Redis, Redis Cluster); `clock`: the instance's local clock;
// `max_wait`: the longest a request waits for units on their way (the store's timeout).
// How often a worker holding leases sweeps the book for units past their ttl.
constexpr std::chrono::milliseconds kLeaseSweepEvery{50};

// `sweep_every`: zero: never (the replay sweeps its simulated books itself, in the log's time).
std::unique_ptr<LimitStore> make_leased_store(
    boost::asio::io_context& ioc, std::unique_ptr<LimitStore> inner, LeaseBook& book,
    const limit::Clock& clock, std::chrono::milliseconds max_wait,
    std::chrono::milliseconds sweep_every = kLeaseSweepEvery);

}  // namespace floodgate::store
