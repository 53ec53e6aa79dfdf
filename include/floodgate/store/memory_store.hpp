#pragma once
// The embedded store: exact limits for one instance with no Redis, and the `local` fallback.
// One MemoryState is shared by all workers; it is sharded so that workers rarely meet on a
// lock, and a request's keys are locked in shard order, so all-or-nothing needs no global lock.

#include <boost/asio/any_io_executor.hpp>
#include <boost/unordered/unordered_flat_map.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>

#include "floodgate/keys/word_hash.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/store/limit_store.hpp"

namespace floodgate::store {

class MemoryState {
 public:
  static constexpr std::size_t kShards = 64;  // shard_for's 6 bits
  // The shard `key` lives in: from the same hash as its entry, so a key is hashed once.
  static std::size_t shard_index(const std::string& key) { return shard_for(digest_of(key)); }

  MemoryState(const limit::Clock& clock, std::size_t max_keys);

  Outcome acquire(std::span<const Item> items);
  // The same into `out`, reusing its decisions' storage (the replay's loop).
  void acquire(std::span<const Item> items, Outcome& out);
  void adjust(const Item& item, std::int64_t delta);
  void release(const Item& item);
  // Forgets the key's state (its record of holds stays: units leased out are still out).
  void reset(const Item& item);

  std::size_t size() const;
  std::uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    limit::State state;
    limit::Micros expires_at = 0;  // neutral from then on: may be forgotten
  };
  // A key is kept as 128 bits of a hash of its text, not as the text: an entry is one cache
  // line with no string to follow on the heap (the compare was a tenth of a replay's time),
  // and half the memory per key. Two keys would have to meet on 128 bits to share a state;
  // their caller parts are keyed HMACs, so nobody can aim at that, and by chance it takes
  // ~2^64 keys.
  struct Digest {
    std::uint64_t a = 0, b = 0;
    bool operator==(const Digest&) const = default;
  };
  static Digest digest_of(const std::string& key) {
    auto [a, b] = keys::word_hash128(key, 0x452821E638D01377ULL, 0xBE5466CF34E90C6CULL);
    return {a, b};
  }
  // The top bits of the half the maps do not use.
  static std::size_t shard_for(const Digest& d) { return static_cast<std::size_t>(d.b >> 58); }
  struct DigestHash {
    using is_avalanching = void;  // already a full mix: no second mix by the table
    std::size_t operator()(const Digest& d) const noexcept { return static_cast<std::size_t>(d.a); }
  };
  // What leasing instances hold on a token_bucket or gcra key, as Redis keeps it beside the
  // state (lua/prelude.lua, `<key>:leases`): per holder, units until a time. A replay of
  // several instances (replay/lease_fleet.hpp) decides leases here exactly as Redis does.
  struct Hold {
    std::string holder;
    std::int64_t units = 0;
    limit::Micros until = 0;
  };
  struct Holds {
    std::vector<Hold> by_holder;
    limit::Micros forget_at = 0;  // the record's own expiry: a minute after its last until
  };
  // A key's holds: every live holder's units, this holder's and until when.
  struct Held {
    std::int64_t live = 0;
    std::int64_t own = 0;
    limit::Micros own_until = 0;
  };
  struct Shard {
    mutable std::mutex mutex;
    // Open addressing: one probe sequence in a flat array instead of a bucket list per key.
    boost::unordered_flat_map<Digest, Entry, DigestHash> map;
    boost::unordered_flat_map<Digest, Holds, DigestHash> holds;  // leased keys only
    std::size_t inserts_since_sweep = 0;
    std::size_t live_after_sweep = 0;  // what the last sweep left
  };

  limit::State current(Shard& shard, const Digest& key, limit::Micros now);
  void store(Shard& shard, const Digest& key, const limit::Params& p, limit::State next,
             limit::Micros now);
  // `key` is known to be absent from `shard`.
  void insert(Shard& shard, const Digest& key, const limit::Params& p, limit::State next,
              limit::Micros now);
  void make_room(Shard& shard, limit::Micros now);
  // Whether `item` is decided under the record of holds: a leasing holder's bucket.
  static bool holds_apply(const Item& item);
  // lua/prelude.lua's leases_of: drops expired holders and brings the state up to now under
  // what was held since it was last written.
  Held leases_of(Shard& shard, const Digest& key, const Item& item, limit::Micros now);
  // The holder's units spent or returned (`freed`): no longer held. Returns what is then held.
  Held release_held(Shard& shard, const Digest& key, const Item& item, std::int64_t freed,
                    limit::Micros now);
  void set_lease(Shard& shard, const Digest& key, const std::string& holder, std::int64_t units,
                 limit::Micros until);

  const limit::Clock& clock_;
  std::size_t max_per_shard_;
  std::array<Shard, kShards> shards_;
  std::atomic<std::uint64_t> evictions_{0};
};

// A worker's handle on a MemoryState: completes on the worker's own event loop.
class MemoryStore final : public LimitStore {
 public:
  MemoryStore(MemoryState& state, boost::asio::any_io_executor executor)
      : state_(state), executor_(std::move(executor)) {}

  void async_acquire(std::vector<Item> items, Handler handler) override;
  void adjust(const Item& item, std::int64_t delta) override { state_.adjust(item, delta); }
  void release(const Item& item) override { state_.release(item); }
  void reset(const Item& item) override { state_.reset(item); }
  bool healthy() const override { return true; }  // in-process: it cannot be unreachable

 private:
  MemoryState& state_;
  boost::asio::any_io_executor executor_;
};

}  // namespace floodgate::store
