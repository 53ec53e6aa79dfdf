#include "floodgate/uri/host.hpp"

#include <cctype>

namespace floodgate::uri {

std::string_view host_name(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    auto close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  auto colon = host.rfind(':');
  if (colon != std::string_view::npos) host = host.substr(0, colon);
  // "shop.example." is the same name as "shop.example" (RFC 1034 section 3.1).
  while (host.size() > 1 && host.back() == '.') host.remove_suffix(1);
  return host;
}

std::string normalize_host(std::string_view host) {
  std::string out(host_name(host));
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace floodgate::uri
