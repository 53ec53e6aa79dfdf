#include "floodgate/limit/heavy_hitters.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <string_view>
#include <unordered_map>

namespace floodgate::limit {

HeavyHitters::HeavyHitters(std::size_t capacity)
    : capacity_(std::max<std::size_t>(1, capacity)), index_(std::bit_ceil(2 * capacity_), 0) {
  slots_.reserve(capacity_);
  heap_.reserve(capacity_);
  where_.reserve(capacity_);
}

std::size_t HeavyHitters::bucket_of(std::uint64_t id) const {
  // Fibonacci hashing: ids are hashes already, but the multiply makes any of their bits count.
  const auto bits = static_cast<unsigned>(std::countr_zero(index_.size()));
  return static_cast<std::size_t>((id * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

std::uint32_t HeavyHitters::index_find(std::uint64_t id) const {
  const std::size_t mask = index_.size() - 1;
  for (std::size_t b = bucket_of(id);; b = (b + 1) & mask) {
    if (index_[b] == 0 || slots_[index_[b] - 1].id == id) return index_[b];
  }
}

void HeavyHitters::index_insert(std::uint64_t id, std::uint32_t slot) {
  const std::size_t mask = index_.size() - 1;
  std::size_t b = bucket_of(id);
  while (index_[b] != 0) b = (b + 1) & mask;
  index_[b] = slot + 1;
}

// Backward-shift deletion: no tombstones, so probes stay short however many keys came and went.
void HeavyHitters::index_erase(std::uint64_t id) {
  const std::size_t mask = index_.size() - 1;
  std::size_t hole = bucket_of(id);
  while (slots_[index_[hole] - 1].id != id) hole = (hole + 1) & mask;
  for (std::size_t next = (hole + 1) & mask; index_[next] != 0; next = (next + 1) & mask) {
    const std::size_t home = bucket_of(slots_[index_[next] - 1].id);
    // The entry at `next` may fill the hole unless its home lies cyclically in (hole, next].
    const bool stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next);
    if (stays) continue;
    index_[hole] = index_[next];
    hole = next;
  }
  index_[hole] = 0;
}

void HeavyHitters::swap_heap(std::uint32_t a, std::uint32_t b) {
  std::swap(heap_[a], heap_[b]);
  where_[heap_[a]] = a;
  where_[heap_[b]] = b;
}

void HeavyHitters::sift_up(std::uint32_t pos) {
  while (pos > 0) {
    const std::uint32_t parent = (pos - 1) / 2;
    if (slots_[heap_[parent]].count <= slots_[heap_[pos]].count) return;
    swap_heap(parent, pos);
    pos = parent;
  }
}

void HeavyHitters::sift_down(std::uint32_t pos) {
  const auto n = static_cast<std::uint32_t>(heap_.size());
  for (;;) {
    std::uint32_t least = pos;
    const std::uint32_t l = 2 * pos + 1, r = l + 1;
    if (l < n && slots_[heap_[l]].count < slots_[heap_[least]].count) least = l;
    if (r < n && slots_[heap_[r]].count < slots_[heap_[least]].count) least = r;
    if (least == pos) return;
    swap_heap(pos, least);
    pos = least;
  }
}

HeavyEntry& HeavyHitters::add(std::uint64_t id, std::uint64_t n, bool& fresh) {
  total_ += n;
  if (const auto found = index_find(id)) {
    const std::uint32_t slot = found - 1;
    slots_[slot].count += n;
    sift_down(where_[slot]);
    fresh = false;
    return slots_[slot];
  }
  fresh = true;
  if (slots_.size() < capacity_) {
    const auto slot = static_cast<std::uint32_t>(slots_.size());
    slots_.push_back({id, {}, n, 0, 0, 0});
    heap_.push_back(slot);
    where_.push_back(slot);
    index_insert(id, slot);
    sift_up(slot);
    return slots_[slot];
  }
  // The new key takes the least counted counter, and its count: it may have been that key.
  const std::uint32_t slot = heap_[0];
  auto& e = slots_[slot];
  index_erase(e.id);
  const std::uint64_t inherited = e.count;
  e.id = id;
  e.caller.clear();  // keeps its capacity: a flood of new keys allocates nothing here
  e.count = inherited + n;
  e.error = inherited;
  e.refused = 0;
  e.shadow_refused = 0;
  index_insert(id, slot);
  sift_down(0);
  return e;
}

const HeavyEntry* HeavyHitters::find(std::uint64_t id) const {
  const auto found = index_find(id);
  return found ? &slots_[found - 1] : nullptr;
}

std::uint64_t HeavyHitters::floor() const {
  return slots_.size() < capacity_ ? 0 : slots_[heap_[0]].count;
}

std::vector<HeavyEntry> HeavyHitters::top(std::size_t n) const {
  std::vector<HeavyEntry> out(slots_.begin(), slots_.end());
  auto heavier = [](const HeavyEntry& a, const HeavyEntry& b) { return a.count > b.count; };
  std::sort(out.begin(), out.end(), heavier);
  if (out.size() > n) out.resize(n);
  return out;
}

void HeavyHitters::clear() {
  total_ = 0;
  slots_.clear();
  heap_.clear();
  where_.clear();
  std::fill(index_.begin(), index_.end(), 0);
}

std::size_t HeavyHitters::bytes() const {
  std::size_t b =
      sizeof(*this) + slots_.capacity() * sizeof(HeavyEntry) +
      (heap_.capacity() + where_.capacity() + index_.capacity()) * sizeof(std::uint32_t);
  for (const auto& e : slots_)
    if (e.caller.capacity() > 15) b += e.caller.capacity() + 1;  // beyond the inline buffer
  return b;
}

MergedTop merge(const std::vector<const HeavyHitters*>& parts, std::size_t k) {
  struct Sum {
    HeavyEntry e;
    std::uint64_t floors_where_tracked = 0;
  };
  MergedTop out;
  std::unordered_map<std::uint64_t, Sum> sums;
  for (const auto* p : parts) {
    out.total += p->total();
    out.floor += p->floor();
    for (const auto& e : p->entries()) {
      auto& s = sums[e.id];
      if (s.e.caller.empty()) {
        s.e.id = e.id;
        s.e.caller = e.caller;
      }
      s.e.count += e.count;
      s.e.error += e.error;
      s.e.refused += e.refused;
      s.e.shadow_refused += e.shadow_refused;
      s.floors_where_tracked += p->floor();
    }
  }
  out.entries.reserve(sums.size());
  for (auto& [id, s] : sums) {
    // Where the key was not tracked it may have been counted up to that summary's floor.
    const std::uint64_t untracked = out.floor - s.floors_where_tracked;
    s.e.count += untracked;
    s.e.error += untracked;
    out.entries.push_back(std::move(s.e));
  }
  auto heavier = [](const HeavyEntry& a, const HeavyEntry& b) {
    return a.count != b.count ? a.count > b.count : a.caller < b.caller;
  };
  const std::size_t n = std::min(k, out.entries.size());
  const auto cut = out.entries.begin() + static_cast<std::ptrdiff_t>(n);
  std::partial_sort(out.entries.begin(), cut, out.entries.end(), heavier);
  // A key left off the list was counted at most as much as the heaviest left off.
  for (auto it = cut; it != out.entries.end(); ++it) out.floor = std::max(out.floor, it->count);
  out.entries.resize(n);
  return out;
}

TopWindow::TopWindow(std::size_t capacity, Micros window, std::size_t slices)
    : window_(std::max<Micros>(1, window)),
      slice_(std::max<Micros>(1, window_ / static_cast<Micros>(std::max<std::size_t>(1, slices)))),
      number_(std::max<std::size_t>(1, slices), -1) {
  // Each made in place: a copy would not keep the reserved room for `capacity` counters.
  ring_.reserve(number_.size());
  for (std::size_t i = 0; i < number_.size(); ++i) ring_.emplace_back(capacity);
}

HeavyHitters& TopWindow::at(Micros now) {
  const std::int64_t n = now / slice_;
  auto& i = number_[static_cast<std::size_t>(n % static_cast<std::int64_t>(ring_.size()))];
  auto& h = ring_[static_cast<std::size_t>(&i - number_.data())];
  if (i != n) {  // a slice that left the window (or a clock that went back): start afresh
    h.clear();
    i = n;
  }
  last_used_ = now;
  return h;
}

std::vector<const HeavyHitters*> TopWindow::recent(Micros now) const {
  const std::int64_t n = now / slice_;
  const auto slices = static_cast<std::int64_t>(ring_.size());
  std::vector<const HeavyHitters*> out;
  for (std::size_t i = 0; i < ring_.size(); ++i)
    if (number_[i] > n - slices && number_[i] <= n && ring_[i].total() > 0)
      out.push_back(&ring_[i]);
  return out;
}

std::size_t TopWindow::bytes() const {
  std::size_t b = sizeof(*this) + number_.capacity() * sizeof(std::int64_t);
  for (const auto& h : ring_) b += h.bytes();
  return b;
}

std::uint64_t key_id(std::string_view key) {
  return std::hash<std::string_view>{}(key);
}

}  // namespace floodgate::limit
