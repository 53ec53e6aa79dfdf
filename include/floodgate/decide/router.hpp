#pragma once
// Route selection: the first route whose host, method and path all match wins.

#include <string_view>

#include "floodgate/config/config.hpp"

namespace floodgate::http {

// `host` is the Host header as received (a port, a trailing dot and letter case are ignored);
// `path` is the request target's path, without the query, as normalize_path() returns it
// (path_normalize.hpp): it is compared byte for byte.
const config::Route* match_route(const config::Config& config, std::string_view method,
                                 std::string_view host, std::string_view path);

// "shop.example:8080" -> "shop.example", "[::1]:80" -> "[::1]".
std::string_view host_without_port(std::string_view host);

}  // namespace floodgate::http
