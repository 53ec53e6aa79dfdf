// `jwt.jwks: {url, refresh, ca_file}`: where the issuer publishes its keys. Only the settings
// are read here; the keys themselves are fetched by the app's JwksRefresher, in the background.
#include "sections.hpp"

namespace floodgate::config {

std::optional<JwksSettings> read_jwks(const Section& s) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(), {"url", "refresh", "ca_file"}) || !s.require("url"))
    return std::nullopt;
  JwksSettings out;
  if (!read_https_url(s, out, "keys are")) return std::nullopt;
  s.duration("refresh", out.refresh, Duration(10'000));
  return out;
}

}  // namespace floodgate::config
