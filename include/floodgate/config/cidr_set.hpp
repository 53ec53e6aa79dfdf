#pragma once
// A set of CIDR ranges (IPv4 and IPv6 together, on the 128-bit form) that answers "is this
// address in any of them" with one binary search: O(log n) for a deny list of 100k entries,
// with no allocation per lookup. Two CIDRs are either disjoint or one contains the other, so
// after dropping the contained ones the ranges are disjoint and sorted by their first address.

#include <compare>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "floodgate/config/address.hpp"

namespace floodgate::config {

class CidrSet {
 public:
  void add(const Cidr& c) {
    pending_.push_back(c);
    dirty_ = true;
  }
  // Sorts and folds what was added; call once the set is complete (lookups need it).
  void seal();
  bool contains(const IpAddress& ip) const;
  bool empty() const { return pending_.empty(); }
  // CIDRs as given (duplicates and nested ones included).
  std::size_t size() const { return pending_.size(); }
  // Disjoint ranges kept for lookups.
  std::size_t ranges() const { return ranges_.size(); }

 private:
  // An address as two big-endian 64-bit halves: compared in two integer steps.
  struct Wide {
    std::uint64_t high = 0;
    std::uint64_t low = 0;
    friend auto operator<=>(const Wide&, const Wide&) = default;
  };
  static Wide wide(const IpAddress& ip);
  struct Range {
    Wide first;
    Wide last;
  };
  std::vector<Cidr> pending_;
  std::vector<Range> ranges_;
  bool dirty_ = false;
};

}  // namespace floodgate::config
