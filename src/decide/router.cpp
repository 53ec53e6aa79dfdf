#include "floodgate/http/router.hpp"

#include <algorithm>

#include "floodgate/ascii.hpp"
#include "floodgate/http/path_normalize.hpp"

namespace floodgate::http {
namespace {

bool matches(const config::RouteMatch& m, std::string_view method, std::string_view host,
             std::string_view path) {
  if (!m.host.empty() && !iequals(m.host, host_name(host))) return false;
  if (!m.methods.empty() &&
      std::find(m.methods.begin(), m.methods.end(), method) == m.methods.end())
    return false;
  if (!m.path.empty()) return path == m.path;
  return path.starts_with(m.path_prefix);
}

}  // namespace

std::string_view host_without_port(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    auto close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  auto colon = host.rfind(':');
  return colon == std::string_view::npos ? host : host.substr(0, colon);
}

const config::Route* match_route(const config::Config& config, std::string_view method,
                                 std::string_view host, std::string_view path) {
  for (const auto& r : config.routes)
    if (matches(r.match, method, host, path)) return &r;
  return nullptr;
}

}  // namespace floodgate::http
