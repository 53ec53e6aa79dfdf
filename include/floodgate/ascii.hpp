#pragma once
// ASCII helpers for text from the wire and from files: case-insensitive comparison (header
// values, schemes, host names), blanks trimmed, hex digits.
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

// Without leading and trailing spaces and tabs.
constexpr std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// 0-15, or -1 when `c` is not a hex digit.
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace floodgate
