#pragma once
// A header block as the HTTP/2 and HTTP/3 libraries take one (names lower-case), built without
// an allocation per field: every name and value is copied into one arena, and the library's
// name-value pairs (nghttp2_nv, nghttp3_nv: the same shape) point into it once it is complete.

#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace floodgate::http {

class HeaderBlock {
 public:
  HeaderBlock() = default;           // nothing allocated until the first add
  explicit HeaderBlock(int status);  // a response's, :status first
  void add(std::string_view name, std::string_view value);
  void add(std::string_view name, std::uint64_t number);  // the number in decimal
  bool empty() const { return entries_.empty(); }

  // The pairs in the order added, as the library's `Nv` with `flags`, into `out` (cleared);
  // valid until the next add.
  template <class Nv, class Out>
  void pairs_into(Out& out, std::uint8_t flags) {
    out.clear();
    auto* base = reinterpret_cast<std::uint8_t*>(arena_.data());
    for (const auto& e : entries_)
      out.push_back(Nv{base + e.name, base + e.value, e.name_len, e.value_len, flags});
  }

 private:
  struct Entry {
    std::uint32_t name, name_len, value, value_len;  // offsets into arena_
  };
  std::string arena_;
  boost::container::small_vector<Entry, 16> entries_;
};

}  // namespace floodgate::http
