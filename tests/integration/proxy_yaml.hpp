#pragma once
// Configs for the TLS and WebSocket tests: one route to one upstream, with the listener
// (plain or TLS), the upstream's URL and the route's limits as the knobs.

#include <string>
#include <vector>

#include "harness.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {

inline std::string http_url(const Origin& origin) {
  return "http://127.0.0.1:" + std::to_string(origin.port());
}

inline std::string https_url(const Origin& origin, const std::string& host = "localhost") {
  return "https://" + host + ":" + std::to_string(origin.port());
}

// `server.listen` (two-space indented) with one TLS listener on an ephemeral port; the first
// certificate is the default one.
inline std::string tls_listen(const std::vector<TestPki::Files>& certs,
                              const std::string& min_version = "") {
  std::string out = "  listen:\n    - address: 127.0.0.1:0\n      tls:\n        certificates:\n";
  for (const auto& c : certs)
    out += "          - { cert: \"" + c.cert + "\", key: \"" + c.key + "\" }\n";
  if (!min_version.empty()) out += "        min_version: \"" + min_version + "\"\n";
  return out;
}

struct ProxyYaml {
  std::string upstream_url;
  std::string listen = "  listen: [127.0.0.1:0]\n";
  std::string server_extra;    // more lines under `server:`, two-space indented
  std::string upstream_extra;  // more keys of the upstream's flow map, e.g. ca_file
  std::string route_extra;     // more lines under the route, four-space indented

  // One worker thread, so that connection reuse and limits are deterministic.
  std::string text() const {
    return "server:\n  threads: 1\n" + listen + server_extra + "upstreams:\n  origin: { url: \"" +
           upstream_url + "\"" + (upstream_extra.empty() ? "" : ", " + upstream_extra) +
           " }\nroutes:\n  - name: all\n    match: { path_prefix: / }\n    upstream: origin\n" +
           route_extra;
  }
};

inline std::string ca_file_key(const std::string& path) {
  return "ca_file: \"" + path + "\"";
}

}  // namespace floodgate::testing
