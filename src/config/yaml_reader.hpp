#pragma once

#include <algorithm>
// Typed reading of YAML nodes that records a Diagnostic (with line and column) instead of
// throwing, so that one pass over a file reports every problem in it.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/config/loader.hpp"
#include "floodgate/config/units.hpp"

namespace floodgate::config {

class YamlReader {
 public:
  // `base_dir`: where relative paths start (empty: the directory of `file`).
  YamlReader(std::string file, const EnvLookup& env, std::vector<Diagnostic>& errors,
             std::vector<Diagnostic>& warnings, std::string base_dir = "")
      : file_(std::move(file)),
        base_dir_(std::move(base_dir)),
        env_(env),
        errors_(errors),
        warnings_(warnings) {}

  void error(const YAML::Node& at, const std::string& path, const std::string& message);
  void error_at(const YAML::Mark& mark, const std::string& message);
  void warn(const YAML::Node& at, const std::string& path, const std::string& message);
  // A problem in a file the config names (a list file), at that file's line and column.
  void error_in(const std::string& file, int line, int column, const std::string& message) {
    errors_.push_back(Diagnostic{file, line, column, message});
  }
  std::size_t error_count() const { return errors_.size(); }
  // The ${NAME}s that had no value, each an error too.
  const std::vector<UnsetVariable>& unset() const { return unset_; }
  // Whether an error was reported at `n` (its line and column).
  bool has_error_at(const YAML::Node& n) const {
    if (!n.IsDefined()) return false;
    const auto m = n.Mark();
    return std::any_of(errors_.begin(), errors_.end(), [&](const Diagnostic& d) {
      return d.line == m.line + 1 && d.column == m.column + 1;
    });
  }
  // A file named in the config: relative paths are relative to the config file's directory,
  // so a config and the files beside it work from any working directory (a fetched config's:
  // to the directory of the local file that names its config_source).
  std::string resolve_path(const std::string& path) const;
  // A reader of another file the config names (an RLS rules file), its diagnostics with this
  // one's, named by that file.
  YamlReader for_file(std::string file) const {
    return YamlReader(std::move(file), env_, errors_, warnings_);
  }

  // True when `n` is a mapping; every key not in `allowed` is reported with a "did you mean".
  bool map(const YAML::Node& n, const std::string& path,
           std::initializer_list<std::string_view> allowed);
  // The elements of a sequence (a single scalar is not silently promoted).
  std::vector<YAML::Node> sequence(const YAML::Node& n, const std::string& path);

  std::optional<std::string> string(const YAML::Node& n, const std::string& path);
  std::optional<std::int64_t> integer(const YAML::Node& n, const std::string& path,
                                      std::int64_t min, std::int64_t max);
  std::optional<bool> boolean(const YAML::Node& n, const std::string& path);
  std::optional<Duration> duration(const YAML::Node& n, const std::string& path,
                                   Duration min = Duration(1));
  std::optional<std::uint64_t> size(const YAML::Node& n, const std::string& path);
  std::optional<Rate> rate(const YAML::Node& n, const std::string& path);

  // A scalar read through one of the units.hpp / address.hpp parsers; its message on failure.
  template <typename T>
  std::optional<T> parsed(const YAML::Node& n, const std::string& path,
                          Parsed<T> (*parse)(std::string_view)) {
    auto s = string(n, path);
    if (!s) return std::nullopt;
    auto result = parse(*s);
    if (auto* msg = std::get_if<std::string>(&result)) {
      error(n, path, *msg);
      return std::nullopt;
    }
    return std::get<T>(std::move(result));
  }

  template <typename E>
  std::optional<E> choice(const YAML::Node& n, const std::string& path,
                          std::initializer_list<std::pair<std::string_view, E>> options) {
    auto s = string(n, path);
    if (!s) return std::nullopt;
    for (const auto& [name, value] : options)
      if (*s == name) return value;
    std::string list;
    for (const auto& [name, value] : options)
      list += (list.empty() ? "" : ", ") + std::string(name);
    error(n, path,
          "unknown value \"" + *s + "\" (expected one of: " + list + ")" +
              hint(*s, names_of(options)));
    return std::nullopt;
  }

  // " (did you mean \"x\"?)" when one of `candidates` is close to `word`, else "".
  static std::string hint(std::string_view word, const std::vector<std::string_view>& candidates);

 private:
  template <typename E>
  static std::vector<std::string_view> names_of(
      std::initializer_list<std::pair<std::string_view, E>> options) {
    std::vector<std::string_view> out;
    for (const auto& o : options) out.push_back(o.first);
    return out;
  }
  std::optional<std::string> expand_env(const YAML::Node& n, const std::string& path,
                                        const std::string& raw);

  std::string file_;
  std::string base_dir_;
  const EnvLookup& env_;
  std::vector<Diagnostic>& errors_;
  std::vector<UnsetVariable> unset_;
  std::vector<Diagnostic>& warnings_;
};

// Present and not an explicit null (`key:` with nothing is treated as absent).
inline bool given(const YAML::Node& n) {
  return n.IsDefined() && !n.IsNull();
}

// One mapping being read: optional fields are assigned only when present and valid, so a
// section's defaults live in the Config aggregates and nowhere else.
class Section {
 public:
  Section(YamlReader& reader, YAML::Node node, std::string path)
      : r_(reader), node_(std::move(node)), path_(std::move(path)) {}

  YAML::Node operator[](const char* key) const { return node_[key]; }
  bool has(const char* key) const { return given(node_[key]); }
  std::string at(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  const YAML::Node& node() const { return node_; }
  const std::string& path() const { return path_; }
  YamlReader& reader() const { return r_; }

  template <typename T>
  void integer(const char* key, T& out, std::int64_t min, std::int64_t max) const {
    if (has(key))
      if (auto v = r_.integer(node_[key], at(key), min, max)) out = static_cast<T>(*v);
  }
  void string(const char* key, std::string& out) const {
    if (has(key))
      if (auto v = r_.string(node_[key], at(key))) out = *v;
  }
  void boolean(const char* key, bool& out) const {
    if (has(key))
      if (auto v = r_.boolean(node_[key], at(key))) out = *v;
  }
  void duration(const char* key, Duration& out, Duration min = Duration(1)) const {
    if (has(key))
      if (auto v = r_.duration(node_[key], at(key), min)) out = *v;
  }
  void size(const char* key, std::uint64_t& out) const {
    if (has(key))
      if (auto v = r_.size(node_[key], at(key))) out = *v;
  }
  template <typename E>
  void choice(const char* key, E& out,
              std::initializer_list<std::pair<std::string_view, E>> options) const {
    if (has(key))
      if (auto v = r_.choice(node_[key], at(key), options)) out = *v;
  }
  // Reports a missing required key at the mapping itself.
  bool require(const char* key) const {
    if (has(key)) return true;
    r_.error(node_, path_, std::string("\"") + key + "\" is required");
    return false;
  }

 private:
  YamlReader& r_;
  YAML::Node node_;
  std::string path_;
};

}  // namespace floodgate::config
