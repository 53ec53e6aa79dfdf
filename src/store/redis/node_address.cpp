#include "node_address.hpp"

#include <algorithm>
#include <charconv>

namespace floodgate::store::redis {

namespace {

// Host names, IPv4 and IPv6 literals (zone ids included): no space, control byte, bracket or
// anything a reply could use to smuggle a second field.
bool plausible_host(std::string_view h) {
  if (h.empty() || h.size() > 255) return false;
  return std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_' || c == ':' || c == '%';
  });
}

}  // namespace

std::string NodeAddress::name() const {
  auto p = std::to_string(port);
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + p;
  return host + ":" + p;
}

std::optional<NodeAddress> make_node_address(std::string_view host, long long port) {
  if (!plausible_host(host) || port < 1 || port > 65535) return std::nullopt;
  return NodeAddress{std::string(host), static_cast<std::uint16_t>(port)};
}

std::optional<NodeAddress> parse_node_address(std::string_view text) {
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return std::nullopt;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    // The last colon: Redis writes IPv6 nodes unbracketed ("::1:7000").
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  long long value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc{} || end != port.data() + port.size() || port.empty()) return std::nullopt;
  return make_node_address(host, value);
}

}  // namespace floodgate::store::redis
