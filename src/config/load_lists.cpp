// `lists:`, global or a route's: what `deny` refuses and `allow` lets past the limits. A
// list's file is read here, at load, so that a reload (SIGHUP) reads it again and a snapshot
// never touches the disk while serving; a bad line fails the load like a bad key would.

#include <cerrno>
#include <cstring>
#include <fstream>

#include "floodgate/ascii.hpp"
#include "sections.hpp"

namespace floodgate::config {

namespace {

// Adds `value` to `list` under `part`; a host is compared in lower case, as requests' are.
void add_value(AccessList& list, const KeyPart& part, std::string value) {
  if (part.kind == KeyPart::Kind::host)
    for (auto& ch : value) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (auto& v : list.values)
    if (v.part.kind == part.kind && v.part.name == part.name) {
      v.values.insert(std::move(value));
      return;
    }
  list.values.push_back({part, {std::move(value)}});
}

// Why `part` cannot key a list entry, or "" when it can.
std::string unusable(const KeyPart& part) {
  if (part.kind == KeyPart::Kind::ip) return "addresses go in \"cidrs\" (or as a CIDR line)";
  if (part.kind == KeyPart::Kind::route) return "a route's own lists apply to it alone";
  return "";
}

// One entry per line: a CIDR or bare address, or PART=VALUE (`jwt:tenant=acme`); `#` starts
// a comment, blank lines are skipped.
void read_file(YamlReader& r, const YAML::Node& at, const std::string& path,
               const std::string& name, AccessList& out) {
  const auto file = r.resolve_path(name);
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    const int err = errno;
    r.error(at, path, "cannot read " + file + ": " + std::strerror(err));
    return;
  }
  out.file = file;
  std::string line;
  int number = 0;
  int reported = 0;
  constexpr int kMostReported = 20;  // a wrong file would otherwise bury everything else
  auto bad = [&](int column, const std::string& message) {
    if (++reported <= kMostReported) r.error_in(file, number, column, path + ": " + message);
  };
  while (std::getline(in, line)) {
    ++number;
    std::string_view text = line;
    if (auto hash = text.find('#'); hash != std::string_view::npos) text = text.substr(0, hash);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);  // a CRLF file
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) continue;
    const int column = static_cast<int>(first) + 1;
    text = trim_blanks(text);
    auto eq = text.find('=');
    if (eq == std::string_view::npos) {
      auto cidr = parse_cidr(text);
      if (auto* c = std::get_if<Cidr>(&cidr))
        out.cidrs.add(*c);
      else
        bad(column, std::get<std::string>(cidr) + " (or PART=VALUE)");
      continue;
    }
    const auto part_text = trim_blanks(text.substr(0, eq));
    const auto value = trim_blanks(text.substr(eq + 1));
    auto part = parse_key_part(part_text);
    if (!part) {
      bad(column, unknown_key_part(part_text));
    } else if (auto why = unusable(*part); !why.empty()) {
      bad(column, "\"" + std::string(part_text) + "\": " + why);
    } else if (value.empty()) {
      bad(column, "no value after \"" + std::string(part_text) + "=\"");
    } else {
      add_value(out, *part, std::string(value));
    }
  }
  if (reported > kMostReported)
    r.error_in(file, number, 0,
               std::to_string(reported - kMostReported) + " more lines could not be read");
}

void read_list(const Section& s, AccessList& out) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(), {"cidrs", "values", "file"})) return;
  if (s.has("cidrs"))
    for (const auto& e : r.sequence(s["cidrs"], s.at("cidrs")))
      if (auto c = r.parsed<Cidr>(e, s.at("cidrs"), parse_cidr)) out.cidrs.add(*c);
  if (s.has("values")) {
    const auto& values = s["values"];
    if (!values.IsMap())
      r.error(values, s.at("values"),
              "expected a map of key parts to values, such as {\"jwt:tenant\": [internal]}");
    else
      for (const auto& kv : values) {
        const auto path = s.at("values") + "." + kv.first.as<std::string>("");
        auto part = read_key_part(r, kv.first, s.at("values"));
        if (!part) continue;
        if (auto why = unusable(*part); !why.empty()) {
          r.error(kv.first, path, why);
          continue;
        }
        for (const auto& e : r.sequence(kv.second, path))
          if (auto v = r.string(e, path)) {
            if (v->empty())
              r.error(e, path, "an empty value matches no request");
            else
              add_value(out, *part, *v);
          }
      }
  }
  if (s.has("file"))
    if (auto name = r.string(s["file"], s.at("file")))
      read_file(r, s["file"], s.at("file"), *name, out);
  out.cidrs.seal();
}

}  // namespace

void read_lists(const Section& s, Lists& out) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(), {"deny", "allow"})) return;
  if (s.has("deny")) read_list(Section(r, s["deny"], s.at("deny")), out.deny);
  if (s.has("allow")) read_list(Section(r, s["allow"], s.at("allow")), out.allow);
}

}  // namespace floodgate::config
