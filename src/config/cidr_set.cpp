#include "floodgate/config/cidr_set.hpp"

#include <algorithm>
#include <cassert>

namespace floodgate::config {

namespace {

IpAddress last_of(const Cidr& c) {
  IpAddress last = c.network;
  for (int i = 0; i < 16; ++i) {
    const int keep = std::clamp(c.prefix - i * 8, 0, 8);
    last.bytes[static_cast<std::size_t>(i)] |=
        static_cast<std::uint8_t>(keep == 8 ? 0 : 0xff >> keep);
  }
  return last;
}

}  // namespace

CidrSet::Wide CidrSet::wide(const IpAddress& ip) {
  Wide w;
  for (std::size_t i = 0; i < 8; ++i) {
    w.high = (w.high << 8) | ip.bytes[i];
    w.low = (w.low << 8) | ip.bytes[i + 8];
  }
  return w;
}

void CidrSet::seal() {
  if (!dirty_) return;
  dirty_ = false;
  std::vector<Range> all;
  all.reserve(pending_.size());
  for (const auto& c : pending_) all.push_back({wide(c.network), wide(last_of(c))});
  // By first address, the widest first: a range that starts inside the one kept before it
  // ends inside it too (CIDRs nest or are disjoint), and is dropped.
  std::sort(all.begin(), all.end(), [](const Range& a, const Range& b) {
    if (a.first != b.first) return a.first < b.first;
    return b.last < a.last;
  });
  ranges_.clear();
  for (const auto& r : all)
    if (ranges_.empty() || ranges_.back().last < r.first) ranges_.push_back(r);
  ranges_.shrink_to_fit();
}

bool CidrSet::contains(const IpAddress& ip) const {
  assert(!dirty_);
  const auto w = wide(ip);
  // The last range starting at or before `ip` is the only one that can hold it.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), w,
                             [](const Wide& a, const Range& r) { return a < r.first; });
  if (it == ranges_.begin()) return false;
  return !(std::prev(it)->last < w);
}

}  // namespace floodgate::config
