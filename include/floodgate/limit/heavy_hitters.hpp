#pragma once
// Who is calling hardest: the heaviest keys of a stream in memory bounded by a number of
// counters, whatever the number of distinct keys. One implementation serves the admin
// listener's /top (per worker, per limit, over a sliding window) and `floodgate replay`.
//
// Space-Saving (Metwally, Agrawal and El Abbadi, 2005) with m counters: a key seen more than
// total/m times is always tracked; a tracked key's count overstates its true count by at most
// its `error` (the count it inherited from the key it displaced), and no error exceeds
// total/m. A key not tracked was seen at most floor() times (the least count, once every
// counter is in use). Summaries merge (Agarwal et al., "Mergeable summaries", 2012): a key's
// merged count adds its count where it is tracked and the summary's floor where it is not,
// and its error the same way, so merged counts keep both guarantees.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "floodgate/limit/clock.hpp"

namespace floodgate::limit {

struct HeavyEntry {
  std::uint64_t id = 0;     // the key's identity (a hash of it)
  std::string caller;       // the key's parts' values, for display; filled once per entry
  std::uint64_t count = 0;  // true count <= count <= true count + error
  std::uint64_t error = 0;
  // Counted while the key was tracked: lower bounds.
  std::uint64_t refused = 0;
  std::uint64_t shadow_refused = 0;
};

class HeavyHitters {
 public:
  explicit HeavyHitters(std::size_t capacity);

  // Counts `n` more for `id`. `fresh` says the key took a counter just now: its caller text is
  // then empty for the caller to fill (text is built only for keys entering the summary).
  HeavyEntry& add(std::uint64_t id, std::uint64_t n, bool& fresh);
  const HeavyEntry* find(std::uint64_t id) const;

  std::uint64_t total() const { return total_; }  // everything added
  std::uint64_t floor() const;                    // the most an untracked key may have been counted
  std::size_t capacity() const { return capacity_; }
  std::size_t size() const { return slots_.size(); }
  const std::vector<HeavyEntry>& entries() const { return slots_; }  // in no order
  std::vector<HeavyEntry> top(std::size_t n) const;                  // largest count first
  void clear();
  // Bytes held, counters and caller texts included: constant once every counter is in use.
  std::size_t bytes() const;

 private:
  void sift_up(std::uint32_t pos);
  void sift_down(std::uint32_t pos);
  void swap_heap(std::uint32_t a, std::uint32_t b);
  std::size_t bucket_of(std::uint64_t id) const;
  std::uint32_t index_find(std::uint64_t id) const;  // slot + 1, or 0: not tracked
  void index_insert(std::uint64_t id, std::uint32_t slot);
  void index_erase(std::uint64_t id);

  std::size_t capacity_;
  std::uint64_t total_ = 0;
  std::vector<HeavyEntry> slots_;     // never moved once in use: the index points here
  std::vector<std::uint32_t> heap_;   // slot numbers, a min-heap on count
  std::vector<std::uint32_t> where_;  // slot -> its position in heap_
  // Open addressing, linear probing: slot + 1, 0 = empty. Twice the capacity, a power of 2.
  std::vector<std::uint32_t> index_;
};

// The sum of summaries (of several workers, of several slices of time): the `k` heaviest by
// merged count, largest first, with the guarantees above. `total` is every count merged;
// `floor` the most a key not listed may have been counted (the summaries' floors together,
// or the heaviest key cut from the list).
struct MergedTop {
  std::vector<HeavyEntry> entries;
  std::uint64_t total = 0;
  std::uint64_t floor = 0;
};
MergedTop merge(const std::vector<const HeavyHitters*>& parts, std::size_t k);

// A sliding window of summaries: `slices` of window/slices each, the oldest dropped as time
// moves on, so that what is read covers the last window to within one slice.
class TopWindow {
 public:
  TopWindow(std::size_t capacity, Micros window, std::size_t slices = 6);
  // The summary counting at `now`; slices that fell out of the window are cleared first.
  HeavyHitters& at(Micros now);
  // The slices within the window ending at `now`.
  std::vector<const HeavyHitters*> recent(Micros now) const;
  Micros window() const { return window_; }
  Micros last_used() const { return last_used_; }
  std::size_t bytes() const;

 private:
  Micros window_;
  Micros slice_;
  std::vector<std::int64_t> number_;  // which slice of time each ring entry holds; -1: none
  std::vector<HeavyHitters> ring_;
  Micros last_used_ = 0;
};

// One limit's recent summaries, copied out of a worker for the admin listener to merge.
struct LimitTop {
  std::string route;
  std::string limit;
  std::string key;  // its key parts, as configured: "ip jwt:tenant"
  std::size_t k = 0;
  Micros window = 0;
  std::vector<HeavyHitters> slices;
};

// A stable 64-bit identity for a key's text (a store key, a caller's text).
std::uint64_t key_id(std::string_view key);

}  // namespace floodgate::limit
