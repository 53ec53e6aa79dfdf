#pragma once
// Network addresses as they appear in the config: host:port endpoints and CIDR ranges.
// Kept free of Asio so that the config library stays light to compile.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "floodgate/config/units.hpp"

namespace floodgate::config {

struct Endpoint {
  std::string host;  // literal address or name, without brackets
  std::uint16_t port = 0;

  std::string to_string() const;  // brackets an IPv6 literal
  bool operator==(const Endpoint&) const = default;
};

// "0.0.0.0:8080", "[::]:8080", "localhost:6379". Port 0 is allowed (tests bind ephemeral ports).
Parsed<Endpoint> parse_endpoint(std::string_view text);

// An IP address in 16 bytes; IPv4 is stored IPv4-mapped (::ffff:a.b.c.d) so that one
// comparison serves both families.
struct IpAddress {
  std::array<std::uint8_t, 16> bytes{};
  bool is_v4() const;
  std::string to_string() const;
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

// Accepts dotted IPv4, IPv6 (also IPv4-mapped IPv6, which becomes the IPv4 address).
std::optional<IpAddress> parse_ip(std::string_view text);

struct Cidr {
  IpAddress network;  // host bits cleared
  int prefix = 0;     // counted on the 128-bit form: an IPv4 /24 is stored as 96 + 24
  bool contains(const IpAddress& ip) const;
  std::string to_string() const;
};

// "10.0.0.0/8", "2001:db8::/32", or a bare address (a host route).
Parsed<Cidr> parse_cidr(std::string_view text);

}  // namespace floodgate::config
