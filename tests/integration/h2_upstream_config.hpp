#pragma once
// Configs for the tests of h2 upstreams (grpc_test.cpp, h2_upstream_test.cpp): floodgate
// with one plain listener speaking HTTP/1.1 and h2c, in front of `protocol: h2` upstreams.

#include <cstdint>
#include <string>

namespace floodgate::testing {

// floodgate on h2c and HTTP/1.1 in front of `upstreams`, with `routes` (YAML list items).
inline std::string grpc_config(const std::string& upstreams, const std::string& routes,
                               const std::string& extra = "") {
  return "server:\n  threads: 1\n  listen:\n    - { address: \"127.0.0.1:0\", protocols: [http1, "
         "h2c] }\n" +
         extra + "upstreams:\n" + upstreams + "routes:\n" + routes;
}

inline std::string h2_upstream(const std::string& name, std::uint16_t port,
                               const std::string& more = "") {
  return "  " + name + ": { url: \"http://127.0.0.1:" + std::to_string(port) + "\", protocol: h2" +
         more + " }\n";
}

}  // namespace floodgate::testing
