#include "floodgate/keys/client_ip.hpp"

#include <algorithm>
#include <vector>

#include "floodgate/ascii.hpp"

namespace floodgate::keys {
namespace {

bool trusted(const config::IpAddress& ip, const config::ClientIpSettings& s) {
  return std::any_of(s.trusted_proxies.begin(), s.trusted_proxies.end(),
                     [&](const config::Cidr& c) { return c.contains(ip); });
}

// "1.2.3.4:5678" and "[2001:db8::1]:443" appear in the wild (e.g. from some load balancers).
std::string_view strip_port(std::string_view v) {
  if (!v.empty() && v.front() == '[') {
    auto close = v.find(']');
    return close == std::string_view::npos ? v : v.substr(1, close - 1);
  }
  if (std::count(v.begin(), v.end(), ':') == 1) return v.substr(0, v.find(':'));
  return v;
}

}  // namespace

config::IpAddress fold_ipv6(const config::IpAddress& ip, int prefix) {
  if (ip.is_v4() || prefix >= 128) return ip;
  config::IpAddress out = ip;
  for (int i = 0; i < 16; ++i) {
    int keep = std::clamp(prefix - i * 8, 0, 8);
    out.bytes[i] &= static_cast<std::uint8_t>(keep == 0 ? 0 : 0xff << (8 - keep));
  }
  return out;
}

config::IpAddress client_ip(const config::IpAddress& peer, std::string_view header,
                            const config::ClientIpSettings& settings) {
  config::IpAddress client = peer;
  if (trusted(peer, settings) && !header.empty()) {
    std::vector<std::string_view> hops;
    while (!header.empty()) {
      auto comma = header.find(',');
      hops.push_back(trim_blanks(header.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      header.remove_prefix(comma + 1);
    }
    for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
      auto ip = config::parse_ip(strip_port(*it));
      if (!ip) break;
      client = *ip;
      if (!trusted(*ip, settings)) break;
    }
  }
  return client;
}

}  // namespace floodgate::keys
