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

namespace floodgate::replay {

// The most frequent keys of a stream in `capacity` counters (Metwally et al.'s Space-Saving):
// a key seen more often than total/capacity is always kept; a count may be overstated by at
// most the `error` it inherited from the key it displaced. Exact while there are no more
// distinct keys than counters.
class TopCounter {
 public:
  explicit TopCounter(std::size_t capacity) : capacity_(capacity) {}

  void add(const std::string& key, std::uint64_t n = 1) {
    if (auto it = index_.find(key); it != index_.end()) {
      auto& slot = slots_[it->second];
      order_.erase({slot.count, it->second});
      slot.count += n;
      order_.insert({slot.count, it->second});
      return;
    }
    if (slots_.size() < capacity_) {
      slots_.push_back({key, n, 0});
      index_.emplace(key, slots_.size() - 1);
      order_.insert({n, slots_.size() - 1});
      return;
    }
    auto smallest = *order_.begin();  // the new key takes the least counted slot
    order_.erase(order_.begin());
    auto& slot = slots_[smallest.second];
    index_.erase(slot.key);
    slot = {key, smallest.first + n, smallest.first};
    index_.emplace(key, smallest.second);
    order_.insert({slot.count, smallest.second});
  }

  struct Entry {
    std::string key;
    std::uint64_t count = 0;
    std::uint64_t error = 0;  // count may be overstated by up to this
  };
  // The `n` largest, largest first.
  std::vector<Entry> top(std::size_t n) const {
    std::vector<Entry> out;
    for (auto it = order_.rbegin(); it != order_.rend() && out.size() < n; ++it)
      out.push_back(slots_[it->second]);
    return out;
  }
  std::uint64_t count_of(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? 0 : slots_[it->second].count;
  }

 private:
  std::size_t capacity_;
  std::vector<Entry> slots_;
  std::unordered_map<std::string, std::size_t> index_;
  std::set<std::pair<std::uint64_t, std::size_t>> order_;  // (count, slot)
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
