#pragma once
// The one spelling of a Host value that routes, keys, the access log and the replay compare.

#include <string>
#include <string_view>

namespace floodgate::uri {

// A Host value (or an absolute-form authority) as routes and keys compare it: lower case,
// without port and without the trailing dot of a fully qualified name.
// "Shop.Example.:8080" -> "shop.example", "[::1]:80" -> "[::1]".
std::string normalize_host(std::string_view host);

// The name part of normalize_host without the case change or a copy: "Shop.Example.:8080" ->
// "Shop.Example" (for comparisons that ignore case anyway).
std::string_view host_name(std::string_view host);

}  // namespace floodgate::uri
