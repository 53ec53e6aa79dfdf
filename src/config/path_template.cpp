// Route path templates (`path_template: /users/{id}/orders`): read with the route, matched
// against normalized request paths when a `path` key part is built.
#include "sections.hpp"

namespace floodgate::config {

bool PathTemplate::matches(std::string_view path) const {
  if (path.empty() || path.front() != '/') return false;
  path.remove_prefix(1);
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const auto slash = path.find('/');
    const auto segment = path.substr(0, slash);
    if (segments[i].empty() ? segment.empty() : segment != segments[i]) return false;
    const bool last = i + 1 == segments.size();
    if (last != (slash == std::string_view::npos)) return false;
    if (!last) path.remove_prefix(slash + 1);
  }
  return true;
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
