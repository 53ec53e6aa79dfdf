#pragma once
// Bounded summaries of keys, so that a replay's memory follows the live keys and not the
// length of the log.

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "floodgate/limit/heavy_hitters.hpp"

namespace floodgate::replay {

// The most frequent keys of a stream, counted by their text on the one heavy-hitter summary
// (limit/heavy_hitters.hpp, shared with the admin listener's /top): a key seen more often
// than total/capacity is always kept; a count may be overstated by at most its `error`.
class TopCounter {
 public:
  explicit TopCounter(std::size_t capacity) : counts_(capacity) {}

  void add(const std::string& key, std::uint64_t n = 1) {
    bool fresh = false;
    auto& e = counts_.add(limit::key_id(key), n, fresh);
    if (fresh) e.caller = key;
  }
  // The `n` largest, largest first; each entry's `caller` is its key.
  std::vector<limit::HeavyEntry> top(std::size_t n) const { return counts_.top(n); }
  std::uint64_t count_of(const std::string& key) const {
    const auto* e = counts_.find(limit::key_id(key));
    return e ? e->count : 0;
  }

 private:
  limit::HeavyHitters counts_;
};

// The `capacity` keys with the highest peak value seen (exact: a key's peak only rises, and a
// key dropped from the set had a peak no higher than every key kept).
class TopPeaks {
 public:
  explicit TopPeaks(std::size_t capacity) : capacity_(capacity) {}

  // Whether a value this high could enter: callers skip building the key text otherwise.
  bool qualifies(double value) const {
    return order_.size() < capacity_ || value > order_.begin()->first;
  }
  void offer(const std::string& key, double value) {
    if (auto it = peaks_.find(key); it != peaks_.end()) {
      if (value <= it->second) return;
      order_.erase({it->second, key});
      it->second = value;
      order_.insert({value, key});
      return;
    }
    if (!qualifies(value)) return;
    if (order_.size() == capacity_) {
      peaks_.erase(order_.begin()->second);
      order_.erase(order_.begin());
    }
    peaks_.emplace(key, value);
    order_.insert({value, key});
  }
  // Highest first.
  std::vector<std::pair<std::string, double>> top() const {
    std::vector<std::pair<std::string, double>> out;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it)
      out.emplace_back(it->second, it->first);
    return out;
  }

 private:
  std::size_t capacity_;
  std::unordered_map<std::string, double> peaks_;
  std::set<std::pair<double, std::string>> order_;
};

}  // namespace floodgate::replay
