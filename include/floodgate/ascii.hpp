#pragma once
// ASCII case-insensitive comparison, for header values, schemes and host names.
//
// Not boost::beast::iequals: Beast 1.81's reads one byte past the end of both strings when
// they differ only in case up to their last character (fuzz_jwt found it on "Bearer"). Inside
// a Beast header buffer that byte exists; in a string_view of exactly the bytes it does not.

#include <algorithm>
#include <string_view>

namespace floodgate {

constexpr char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

constexpr bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return ascii_lower(x) == ascii_lower(y);
         });
}

}  // namespace floodgate
