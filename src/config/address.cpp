#include "floodgate/config/address.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace floodgate::config {

std::string Endpoint::to_string() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Parsed<Endpoint> parse_endpoint(std::string_view text) {
  const std::string expected =
      "expected HOST:PORT such as \"0.0.0.0:8080\" or \"[::]:8080\", got \"" + std::string(text) +
      "\"";
  Endpoint ep;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return expected;
    ep.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
    if (!parse_ip(ep.host)) return expected;
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return expected;
    ep.host = std::string(text.substr(0, colon));
    if (ep.host.find(':') != std::string::npos) return expected;  // IPv6 needs brackets
    port = text.substr(colon + 1);
  }
  unsigned value = 0;
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc{} || p != port.data() + port.size() || value > 65535 || port.empty())
    return "port in \"" + std::string(text) + "\" must be a number from 0 to 65535";
  ep.port = static_cast<std::uint16_t>(value);
  return ep;
}

bool IpAddress::is_v4() const {
  static constexpr std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(bytes.data(), mapped, 12) == 0;
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (is_v4()) {
    // By hand: this runs for every request keyed by IP, and inet_ntop goes through printf.
    char* p = buf;
    for (int i = 12; i < 16; ++i) {
      unsigned v = bytes[static_cast<std::size_t>(i)];
      if (v >= 100) *p++ = static_cast<char>('0' + v / 100);
      if (v >= 10) *p++ = static_cast<char>('0' + v / 10 % 10);
      *p++ = static_cast<char>('0' + v % 10);
      if (i < 15) *p++ = '.';
    }
    return std::string(buf, p);
  } else {
    inet_ntop(AF_INET6, bytes.data(), buf, sizeof buf);
  }
  return buf;
}

std::optional<IpAddress> parse_ip(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN || text.find('\0') != std::string_view::npos)
    return std::nullopt;
  char buf[INET6_ADDRSTRLEN] = {};
  std::memcpy(buf, text.data(), text.size());
  IpAddress ip;
  in_addr v4{};
  if (inet_pton(AF_INET, buf, &v4) == 1) {
    ip.bytes[10] = ip.bytes[11] = 0xff;
    std::memcpy(ip.bytes.data() + 12, &v4, 4);
    return ip;
  }
  // An IPv6 zone ("fe80::1%eth0") is not an identity of a client: refuse it.
  if (inet_pton(AF_INET6, buf, ip.bytes.data()) == 1) return ip;
  return std::nullopt;
}

bool Cidr::contains(const IpAddress& ip) const {
  int full = prefix / 8, rest = prefix % 8;
  if (std::memcmp(ip.bytes.data(), network.bytes.data(), full) != 0) return false;
  if (rest == 0) return true;
  std::uint8_t mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (ip.bytes[full] & mask) == network.bytes[full];
}

std::string Cidr::to_string() const {
  int shown = network.is_v4() ? prefix - 96 : prefix;
  return network.to_string() + "/" + std::to_string(shown);
}

Parsed<Cidr> parse_cidr(std::string_view text) {
  const std::string expected =
      "expected an address or CIDR such as \"10.0.0.0/8\" or \"2001:db8::/32\", got \"" +
      std::string(text) + "\"";
  auto slash = text.find('/');
  auto ip = parse_ip(text.substr(0, slash));
  if (!ip) return expected;
  Cidr c;
  c.network = *ip;
  int max = ip->is_v4() ? 32 : 128;
  int bits = max;
  if (slash != std::string_view::npos) {
    auto p = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), bits);
    if (ec != std::errc{} || end != p.data() + p.size() || p.empty() || bits < 0 || bits > max)
      return "prefix length in \"" + std::string(text) + "\" must be 0 to " + std::to_string(max);
  }
  c.prefix = ip->is_v4() ? 96 + bits : bits;
  for (int i = 0; i < 16; ++i) {
    int keep = std::clamp(c.prefix - i * 8, 0, 8);
    c.network.bytes[i] &= static_cast<std::uint8_t>(keep == 0 ? 0 : 0xff << (8 - keep));
  }
  return c;
}

}  // namespace floodgate::config
