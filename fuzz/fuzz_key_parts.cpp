// The key parts a client spells: a route's path template against request paths, and a cookie
// out of a Cookie header. Input: "TEMPLATE\nPATH\nCOOKIE HEADER\nCOOKIE NAME" (missing lines
// are empty). The template goes through the real config loader (what an operator writes);
// when it loads, the path is normalized as a request's is and matched, and the promises of
// path_template.cpp are checked: a normalized path stays as it is when normalized again, and
// no spelling an origin serves as the same endpoint (a trailing separator, doubled ones, a
// literal segment's case) gets a different answer, which would give it a bucket of its own.
// The cookie's value must lie inside the header it came from, without a ';'.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "floodgate/keys/key_builder.hpp"
#include "floodgate/uri/path_normalize.hpp"
#include "support.hpp"

namespace {

using namespace floodgate;

std::string_view next_line(std::string_view& in) {
  const auto nl = in.find('\n');
  const auto line = in.substr(0, nl);
  in.remove_prefix(nl == std::string_view::npos ? in.size() : nl + 1);
  return line;
}

// A config whose one route has `path_template: TEMPLATE` (YAML single-quoted: only the quote
// itself needs escaping), or null when the loader refuses it.
config::ConfigPtr with_template(std::string_view text) {
  std::string quoted;
  for (char ch : text) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) return nullptr;  // not one line
    quoted += ch;
    if (ch == '\'') quoted += '\'';
  }
  const std::string yaml = R"(
server: { listen: [127.0.0.1:8080] }
upstreams: { origin: { url: http://127.0.0.1:9000 } }
routes:
  - name: all
    match: { path_prefix: / }
    upstream: origin
    path_template: ')" + quoted +
                           R"('
    limits: [{ name: l, algorithm: fixed_window, limit: 5, window: 1m, key: [path] }]
)";
  return config::load_config_text(yaml, "fuzz-key-parts.yaml", fuzz::no_env()).config;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return out;
}

// Every '/' doubled: runs of separators are one to an origin.
std::string doubled(std::string_view s) {
  std::string out;
  for (char ch : s) {
    out += ch;
    if (ch == '/') out += '/';
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto template_text = next_line(in);
  const auto path = next_line(in);
  const auto cookie_header = next_line(in);
  const auto cookie_name = next_line(in);

  if (auto value = keys::cookie_value(cookie_header, cookie_name)) {
    if (value->data() < cookie_header.data() ||
        value->data() + value->size() > cookie_header.data() + cookie_header.size())
      __builtin_trap();                                                // a view of something else
    if (value->find(';') != std::string_view::npos) __builtin_trap();  // crossed a pair
  }

  // The loader keeps one template per route when it loads: reloading the same text for every
  // input would be the fuzzer's whole cost, so the last config is kept.
  static std::string last_text;
  static config::ConfigPtr last;
  if (!last || template_text != last_text) {
    last_text = template_text;
    last = with_template(template_text);
  }
  if (!last || last->routes.empty() || last->routes[0].path_templates.empty()) return 0;
  const auto& route = last->routes[0];

  const auto normalized = uri::normalize_path(path);
  if (!normalized) return 0;  // refused with a 400 before any key is built
  const auto again = uri::normalize_path(normalized.path);
  if (!again || again.path != normalized.path) __builtin_trap();  // one spelling, not two

  const auto matched = keys::matching_template(route, normalized.path);
  if (!matched.empty() && matched != route.path_templates[0].text) __builtin_trap();
  const bool m = !matched.empty();
  auto matches = [&](const std::string& p) { return !keys::matching_template(route, p).empty(); };
  if (matches(normalized.path + "/") != m) __builtin_trap();
  if (matches(doubled(normalized.path)) != m) __builtin_trap();
  if (matches(upper(normalized.path)) != m) __builtin_trap();
  return 0;
}
