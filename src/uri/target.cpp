#include "floodgate/uri/target.hpp"

#include <algorithm>

namespace floodgate::uri {

std::optional<Target> split_target(std::string_view target) {
  if (target.empty()) return std::nullopt;
  Target t;
  if (target.front() != '/') {
    std::string_view rest;
    if (target.starts_with("http://"))
      rest = target.substr(7);
    else if (target.starts_with("https://"))
      rest = target.substr(8);
    else
      return std::nullopt;
    auto slash = rest.find_first_of("/?");
    t.authority = rest.substr(0, slash);
    if (t.authority.empty() || t.authority.find('@') != std::string_view::npos) return std::nullopt;
    target = slash == std::string_view::npos ? std::string_view("/") : rest.substr(slash);
    if (target.front() == '?') return std::nullopt;  // "http://h?x" has no path: refuse
  }
  t.origin_form = target;
  auto q = target.find('?');
  t.path = target.substr(0, q);
  if (q != std::string_view::npos) t.query = target.substr(q + 1);
  return t;
}

std::optional<Target> parse_target(std::string_view target) {
  // RFC 3986 characters allowed in a path and query; anything else (controls, space, '#',
  // non-ASCII) means the client is not speaking HTTP or is probing the parser.
  auto allowed = [](unsigned char c) {
    return c > 0x20 && c < 0x7f && c != '#' && c != '"' && c != '<' && c != '>' && c != '\\' &&
           c != '^' && c != '`' && c != '{' && c != '|' && c != '}';
  };
  if (!std::all_of(target.begin(), target.end(), allowed)) return std::nullopt;
  return split_target(target);
}

NormalizedPath normalize_target(Target& t, std::string& storage) {
  if (is_normal_path(t.path)) return {};  // already what routing, keys and the origin see
  auto normal = normalize_path(t.path, {.allow_encoded_separators = true});
  if (!normal) return normal;
  // The query (with its '?', even an empty one) stays byte for byte what the client sent:
  // its meaning is the origin's, and query: keys read it raw.
  const auto path_size = normal.path.size();
  std::string text = std::move(normal.path);
  text += t.origin_form.substr(t.path.size());  // "" or "?" and the query
  storage = std::move(text);
  normal.path.clear();
  t.origin_form = storage;
  t.path = t.origin_form.substr(0, path_size);
  if (path_size < t.origin_form.size()) t.query = t.origin_form.substr(path_size + 1);
  return normal;
}

}  // namespace floodgate::uri
