#include "yaml_reader.hpp"

#include <algorithm>
#include <charconv>

namespace floodgate::config {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      std::size_t subst = diag + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, subst});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string shown(const YAML::Node& n) {
  if (n.IsScalar()) return "\"" + n.Scalar() + "\"";
  if (n.IsMap()) return "a map";
  if (n.IsSequence()) return "a list";
  return "nothing";
}

}  // namespace

std::string YamlReader::hint(std::string_view word,
                             const std::vector<std::string_view>& candidates) {
  std::string_view best;
  std::size_t best_d = std::string_view::npos;
  for (auto c : candidates) {
    auto d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  std::size_t allowed = std::max<std::size_t>(2, word.size() / 3);
  if (best.empty() || best_d > allowed) return "";
  return " (did you mean \"" + std::string(best) + "\"?)";
}

std::string YamlReader::resolve_path(const std::string& path) const {
  if (path.empty() || path.front() == '/') return path;
  if (!base_dir_.empty()) return base_dir_ + (base_dir_.back() == '/' ? "" : "/") + path;
  auto slash = file_.rfind('/');
  if (slash == std::string::npos) return path;
  return file_.substr(0, slash + 1) + path;
}

void YamlReader::error_at(const YAML::Mark& mark, const std::string& message) {
  Diagnostic d{file_, mark.is_null() ? 0 : mark.line + 1, mark.is_null() ? 0 : mark.column + 1,
               message};
  errors_.push_back(std::move(d));
}

void YamlReader::error(const YAML::Node& at, const std::string& path, const std::string& message) {
  error_at(at.IsDefined() ? at.Mark() : YAML::Mark::null_mark(),
           path.empty() ? message : path + ": " + message);
}

void YamlReader::warn(const YAML::Node& at, const std::string& path, const std::string& message) {
  auto mark = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
  warnings_.push_back(Diagnostic{file_, mark.is_null() ? 0 : mark.line + 1,
                                 mark.is_null() ? 0 : mark.column + 1, path + ": " + message});
}

bool YamlReader::map(const YAML::Node& n, const std::string& path,
                     std::initializer_list<std::string_view> allowed) {
  if (!n.IsMap()) {
    error(n, path, "expected a map, got " + shown(n));
    return false;
  }
  std::vector<std::string_view> names(allowed);
  std::vector<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const YAML::Node key = it->first;  // a copy: it->first lives in a temporary proxy
    if (!key.IsScalar()) {
      error(key, path, "keys must be plain names");
      continue;
    }
    const std::string& k = key.Scalar();
    // yaml-cpp keeps both entries of a repeated key and reads the first: say so rather than
    // silently ignoring the one the operator probably edited last.
    if (std::find(seen.begin(), seen.end(), k) != seen.end())
      error_at(key.Mark(), "duplicate key \"" + k + "\"" + (path.empty() ? "" : " in " + path));
    seen.push_back(k);
    if (std::find(names.begin(), names.end(), k) == names.end()) {
      std::string where = path.empty() ? "" : " in " + path;
      error_at(key.Mark(), "unknown key \"" + k + "\"" + where + hint(k, names));
    }
  }
  return true;
}

std::vector<YAML::Node> YamlReader::sequence(const YAML::Node& n, const std::string& path) {
  std::vector<YAML::Node> out;
  if (!n.IsSequence()) {
    error(n, path, "expected a list, got " + shown(n));
    return out;
  }
  for (const auto& e : n) out.push_back(e);
  return out;
}

std::optional<std::string> YamlReader::expand_env(const YAML::Node& n, const std::string& path,
                                                  const std::string& raw) {
  std::string out;
  std::size_t i = 0;
  bool ok = true;
  while (i < raw.size()) {
    auto start = raw.find("${", i);
    if (start == std::string::npos) {
      out.append(raw, i);
      break;
    }
    out.append(raw, i, start - i);
    auto end = raw.find('}', start);
    if (end == std::string::npos) {
      error(n, path, "unterminated \"${\" in \"" + raw + "\"");
      return std::nullopt;
    }
    std::string inner = raw.substr(start + 2, end - start - 2);
    std::optional<std::string> fallback;
    if (auto sep = inner.find(":-"); sep != std::string::npos) {
      fallback = inner.substr(sep + 2);
      inner.resize(sep);
    }
    bool valid = !inner.empty() && std::all_of(inner.begin(), inner.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    if (!valid) {
      error(n, path, "\"${" + inner + "}\" is not a valid environment variable reference");
      ok = false;
    } else if (auto v = env_(inner); v && !(fallback && v->empty())) {
      out += *v;
    } else if (fallback) {
      out += *fallback;
    } else {
      error(n, path, "environment variable " + inner + " is not set");
      unset_.push_back({inner, path});
      ok = false;
    }
    i = end + 1;
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::string> YamlReader::string(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) {
    error(n, path, "expected a string, got " + shown(n));
    return std::nullopt;
  }
  return expand_env(n, path, n.Scalar());
}

std::optional<std::int64_t> YamlReader::integer(const YAML::Node& n, const std::string& path,
                                                std::int64_t min, std::int64_t max) {
  auto s = string(n, path);
  if (!s) return std::nullopt;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (ec != std::errc{} || p != s->data() + s->size() || s->empty()) {
    error(n, path, "expected a whole number, got \"" + *s + "\"");
    return std::nullopt;
  }
  if (v < min || v > max) {
    error(n, path,
          "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + *s);
    return std::nullopt;
  }
  return v;
}

std::optional<bool> YamlReader::boolean(const YAML::Node& n, const std::string& path) {
  auto s = string(n, path);
  if (!s) return std::nullopt;
  if (*s == "true" || *s == "yes" || *s == "on") return true;
  if (*s == "false" || *s == "no" || *s == "off") return false;
  error(n, path, "expected true or false, got \"" + *s + "\"");
  return std::nullopt;
}

std::optional<Duration> YamlReader::duration(const YAML::Node& n, const std::string& path,
                                             Duration min) {
  auto d = parsed<Duration>(n, path, parse_duration);
  if (d && *d < min) {
    error(n, path, "must be at least " + format_duration(min) + ", got \"" + n.Scalar() + "\"");
    return std::nullopt;
  }
  return d;
}

std::optional<std::uint64_t> YamlReader::size(const YAML::Node& n, const std::string& path) {
  return parsed<std::uint64_t>(n, path, parse_size);
}

std::optional<Rate> YamlReader::rate(const YAML::Node& n, const std::string& path) {
  return parsed<Rate>(n, path, parse_rate);
}

}  // namespace floodgate::config
