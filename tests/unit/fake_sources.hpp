#pragma once
// Stand-ins for the request's headers and verified claims (interfaces of keys/): map-backed,
// so policy and key tests need no HTTP message and no token.

#include <cctype>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "floodgate/keys/key_builder.hpp"

namespace floodgate::testing {

// Case-insensitive request headers.
class Headers final : public keys::HeaderSource {
 public:
  Headers(std::initializer_list<std::pair<std::string, std::string>> h) {
    for (auto& [k, v] : h) map_[lower(k)] = v;
  }
  std::optional<std::string_view> header(std::string_view name) const override {
    auto it = map_.find(lower(std::string(name)));
    if (it == map_.end()) return std::nullopt;
    return std::string_view(it->second);
  }

 private:
  static std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  std::map<std::string, std::string> map_;
};

class Claims final : public keys::ClaimSource {
 public:
  Claims(std::initializer_list<std::pair<std::string, std::string>> c) : map_(c.begin(), c.end()) {}
  std::optional<std::string> claim(std::string_view name) const override {
    auto it = map_.find(std::string(name));
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::map<std::string, std::string> map_;
};

}  // namespace floodgate::testing
