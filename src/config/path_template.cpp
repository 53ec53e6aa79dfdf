// Route path templates (`path_template: /users/{id}/orders`): read with the route, matched
// against normalized request paths when a `path` key part is built.
#include <utility>

#include "floodgate/ascii.hpp"
#include "sections.hpp"

namespace floodgate::config {
namespace {

// %2F or %5C at the start of `s`, in either case of hex: normalized paths keep them encoded,
// and an origin that decodes them reads a separator.
bool encoded_separator(std::string_view s) {
  return s.size() >= 3 && s[0] == '%' &&
         ((s[1] == '2' && ascii_lower(s[2]) == 'f') || (s[1] == '5' && ascii_lower(s[2]) == 'c'));
}

// The next segment of `path` (cut at '/' or an encoded separator), with `path` moved past it.
std::string_view next_segment(std::string_view& path) {
  for (std::size_t i = 0; i < path.size(); ++i) {
    const std::size_t separator = path[i] == '/' ? 1 : encoded_separator(path.substr(i)) ? 3 : 0;
    if (separator == 0) continue;
    const auto segment = path.substr(0, i);
    path.remove_prefix(i + separator);
    return segment;
  }
  return std::exchange(path, std::string_view());
}

}  // namespace

// Matched as an origin could read the path, so that no spelling it serves as the template's
// endpoint gets a bucket of its own: separators encoded or doubled, a trailing one, "."
// segments, ;parameters (Tomcat, Jetty, Spring) and the case of literal segments (IIS,
// ASP.NET) are ignored. Matching more spellings only makes the endpoint's limit stricter.
bool PathTemplate::matches(std::string_view path) const {
  if (path.empty() || path.front() != '/') return false;
  std::size_t matched = 0;
  while (!path.empty()) {
    auto segment = next_segment(path);
    segment = segment.substr(0, segment.find(';'));
    if (segment.empty() || segment == ".") continue;
    if (matched == segments.size()) return false;
    const auto& expected = segments[matched++];
    if (!expected.empty() && !iequals(segment, expected)) return false;
  }
  return matched == segments.size();
}

namespace {

bool parameter_name(std::string_view s) {
  if (s.empty()) return false;
  for (char ch : s)
    if (!(((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z') || (ch >= '0' && ch <= '9') || ch == '_'))
      return false;
  return true;
}

// One template, or the error that says what is wrong with it.
std::optional<PathTemplate> parse_template(const std::string& text, std::string& error) {
  if (text.size() < 2 || text.front() != '/') {
    error = "must start with \"/\" and name at least one segment";
    return std::nullopt;
  }
  PathTemplate t{text, {}};
  std::string_view rest(text);
  rest.remove_prefix(1);
  bool any_parameter = false;
  while (true) {
    const auto slash = rest.find('/');
    const auto segment = rest.substr(0, slash);
    if (segment.empty() || segment == "." || segment == "..") {
      error =
          "an empty, \".\" or \"..\" segment never matches: request paths are matched "
          "normalized";
      return std::nullopt;
    }
    bool separator = false;
    for (std::size_t i = 0; i < segment.size(); ++i)
      separator |= encoded_separator(segment.substr(i));
    if (separator || segment.find(';') != std::string_view::npos) {
      error = "the segment \"" + std::string(segment) +
              "\" holds ';' or %2F/%5C, which never match: request paths are matched without "
              "their ;parameters and cut at encoded separators";
      return std::nullopt;
    }
    if (segment.front() == '{' && segment.back() == '}' &&
        parameter_name(segment.substr(1, segment.size() - 2))) {
      t.segments.emplace_back();
      any_parameter = true;
    } else if (segment.find_first_of("{}") != std::string_view::npos) {
      error = "the segment \"" + std::string(segment) +
              "\" mixes text and braces: a parameter is a whole segment, {name} (letters, "
              "digits, '_')";
      return std::nullopt;
    } else {
      t.segments.emplace_back(segment);
    }
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  if (!any_parameter) {
    error = "no {parameter}: a path without one needs no template";
    return std::nullopt;
  }
  return t;
}

}  // namespace

void read_path_templates(const Section& s, std::vector<PathTemplate>& out) {
  auto& r = s.reader();
  const auto& n = s["path_template"];
  auto add = [&](const YAML::Node& e) {
    auto text = r.string(e, s.at("path_template"));
    if (!text) return;
    std::string error;
    if (auto t = parse_template(*text, error))
      out.push_back(std::move(*t));
    else
      r.error(e, s.at("path_template"), "\"" + *text + "\": " + error);
  };
  if (n.IsSequence())
    for (const auto& e : r.sequence(n, s.at("path_template"))) add(e);
  else
    add(n);
}

}  // namespace floodgate::config
