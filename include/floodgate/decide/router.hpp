#pragma once
// Route selection: the first route whose host, method and path all match wins.

#include <string_view>

#include "floodgate/config/config.hpp"
#include "floodgate/uri/path_normalize.hpp"

namespace floodgate::decide {

// `host` is the Host header as received (a port, a trailing dot and letter case are ignored);
// `path` is the request target's path, without the query, as normalize_path() returns it
// (uri/path_normalize.hpp): it is compared byte for byte.
const config::Route* match_route(const config::Config& config, std::string_view method,
                                 std::string_view host, std::string_view path);

// A path keeping %2F, %5C or %00 goes only to a route that allows them (allow_encoded_slashes);
// `route` null: no route matched.
bool refuses_encoded_separators(const uri::NormalizedPath& p, const config::Route* route);

}  // namespace floodgate::decide
