#include "floodgate/decide/router.hpp"

#include <algorithm>

#include "floodgate/ascii.hpp"
#include "floodgate/uri/host.hpp"

namespace floodgate::decide {
namespace {

bool matches(const config::RouteMatch& m, std::string_view method, std::string_view host,
             std::string_view path) {
  if (!m.host.empty() && !iequals(m.host, uri::host_name(host))) return false;
  if (!m.methods.empty() &&
      std::find(m.methods.begin(), m.methods.end(), method) == m.methods.end())
    return false;
  if (!m.path.empty()) return path == m.path;
  return path.starts_with(m.path_prefix);
}

}  // namespace

const config::Route* match_route(const config::Config& config, std::string_view method,
                                 std::string_view host, std::string_view path) {
  for (const auto& r : config.routes)  // an RLS domain's route is never an HTTP request's
    if (!r.rls && matches(r.match, method, host, path)) return &r;
  return nullptr;
}

bool refuses_encoded_separators(const uri::NormalizedPath& p, const config::Route* route) {
  return p.encoded_separator && !(route && route->allow_encoded_slashes);
}

}  // namespace floodgate::decide
