#pragma once
// The one spelling of a request path and host that routing, keys, the access log and the
// upstream all see, so that no variant of a path walks around a limit: `//api/checkout`,
// `/api/./checkout`, `/x/../api/checkout` and `/api/%63heckout` are all `/api/checkout`.
// Pure, no Asio: the config loader uses it too, to refuse route paths that could never match.
// (Layer uri/: below everything but base; it includes nothing of floodgate but ascii.hpp.)

#include <string>
#include <string_view>

namespace floodgate::uri {

enum class PathError {
  none,
  bad_escape,         // '%' not followed by two hex digits
  encoded_separator,  // %2F, %5C or %00, and the caller did not allow them
  // A "." or ".." segment with a ";" parameter ("/public/..;/api"): Tomcat, Jetty and Spring
  // drop the parameter and climb, so the origin would serve a path other than the one limited.
  dot_segment_parameter,
};

struct PathOptions {
  // Keep %2F / %5C / %00 (encoded, upper-case hex) instead of refusing the path: for a route
  // whose origin gives them a meaning (object stores, some APIs). Never decoded either way.
  bool allow_encoded_separators = false;
};

struct NormalizedPath {
  std::string path;  // starts with '/'; empty when error != none
  PathError error = PathError::none;
  // The path keeps an encoded '/', '\' or NUL (only ever set under allow_encoded_separators).
  bool encoded_separator = false;
  explicit operator bool() const { return error == PathError::none; }
};

// `raw`: a request target's path, without the query. In order: percent-encodings of
// unreserved characters (RFC 3986 section 2.3) are decoded and other encodings kept with
// upper-case hex (section 6.2.2); runs of '/' are merged into one; "." and ".." segments are
// removed (section 5.2.4, also when they were spelled %2E), a ".." at the root staying at the
// root. A trailing '/' is kept; an empty path becomes "/".
NormalizedPath normalize_path(std::string_view raw, PathOptions options = {});

// True when normalize_path would return `path` unchanged, decided without building a copy:
// it starts with '/' and has no '%', no "//" and no "/." (conservatively: "/.x" is normal but
// normalized anyway). The common case on the request path and in a replay of millions of lines.
bool is_normal_path(std::string_view path);

}  // namespace floodgate::uri
