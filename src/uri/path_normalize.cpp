#include "floodgate/uri/path_normalize.hpp"

#include <cctype>
#include <vector>

#include "floodgate/ascii.hpp"

namespace floodgate::uri {
namespace {

// ASCII only, whatever the locale says.
bool is_unreserved(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// Step one: every escape checked, unreserved ones decoded, the rest upper-cased. A '/' in the
// result is always a real separator: %2F stays encoded, so it can never become one.
PathError decode_unreserved(std::string_view raw, PathOptions options, std::string& out,
                            bool& encoded_separator) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out.reserve(raw.size() + 1);
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '%') {
      out += raw[i];
      continue;
    }
    if (i + 2 >= raw.size()) return PathError::bad_escape;
    int hi = hex_value(raw[i + 1]);
    int lo = hex_value(raw[i + 2]);
    if (hi < 0 || lo < 0) return PathError::bad_escape;
    auto c = static_cast<unsigned char>(hi * 16 + lo);
    i += 2;
    if (is_unreserved(c)) {
      out += static_cast<char>(c);
      continue;
    }
    if (c == '/' || c == '\\' || c == '\0') {
      // An origin that decodes these would see another path than the one routed and limited.
      if (!options.allow_encoded_separators) return PathError::encoded_separator;
      encoded_separator = true;
    }
    out += '%';
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return PathError::none;
}

// Steps two and three over the decoded path: empty segments (merged slashes) and "." are
// dropped, ".." drops the segment before it (none at the root: it clamps there).
std::string remove_dot_segments(std::string_view decoded) {
  std::vector<std::string_view> segments;
  bool trailing_slash = false;
  std::size_t start = decoded.empty() || decoded.front() != '/' ? 0 : 1;
  while (start <= decoded.size()) {
    auto slash = decoded.find('/', start);
    auto end = slash == std::string_view::npos ? decoded.size() : slash;
    auto segment = decoded.substr(start, end - start);
    const bool last = slash == std::string_view::npos;
    // "/a/b/" and "/a/b/." and "/a/b/c/.." all name the directory "/a/b/" (RFC 3986 5.2.4).
    if (segment == "..") {
      if (!segments.empty()) segments.pop_back();
      trailing_slash = last;
    } else if (segment.empty() || segment == ".") {
      trailing_slash = last ? true : trailing_slash;
    } else {
      segments.push_back(segment);
      trailing_slash = false;
    }
    if (last) break;
    start = slash + 1;
  }
  std::string out;
  out.reserve(decoded.size() + 1);
  for (auto s : segments) {
    out += '/';
    out += s;
  }
  if (out.empty() || trailing_slash) out += '/';
  return out;
}

// "/..;x/", "/.;/": a segment that is a dot segment once a servlet container drops its
// path parameter.
bool has_dot_segment_parameter(std::string_view decoded) {
  for (std::size_t at = decoded.find("/."); at != std::string_view::npos;
       at = decoded.find("/.", at + 1)) {
    auto rest = decoded.substr(at + 2);
    if (rest.starts_with(".")) rest.remove_prefix(1);
    if (rest.starts_with(";")) return true;
  }
  return false;
}

}  // namespace

bool is_normal_path(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%') return false;
    if (path[i] == '/' && i + 1 < path.size() && (path[i + 1] == '/' || path[i + 1] == '.'))
      return false;
  }
  return true;
}

NormalizedPath normalize_path(std::string_view raw, PathOptions options) {
  NormalizedPath result;
  std::string decoded;
  result.error = decode_unreserved(raw, options, decoded, result.encoded_separator);
  if (result.error != PathError::none) {
    result.encoded_separator = false;
    return result;
  }
  if (has_dot_segment_parameter(decoded)) {
    result.error = PathError::dot_segment_parameter;
    result.encoded_separator = false;
    return result;
  }
  result.path = remove_dot_segments(decoded);
  return result;
}

}  // namespace floodgate::uri
