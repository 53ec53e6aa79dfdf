// The two log formats replay reads. Hand-written scanners rather than a JSON library: a
// replay reads millions of lines a second, and only a dozen flat fields matter.
#include <charconv>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <cstring>

#include "floodgate/uri/host.hpp"
#include "floodgate/uri/target.hpp"
#include "floodgate/limit/utc_time.hpp"
#include "log_record.hpp"

namespace floodgate::replay {
namespace {

bool valid_date(int mo, int d, int h, int mi, int sec) {
  return mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h <= 23 && mi <= 59 && sec <= 60;
}

// ------------------------------------------------------------------ a tiny JSON cursor

// The first '"' or '\\' in [p, end), or end: 16 bytes at a time (SSE2 is part of x86-64).
const char* special(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  for (; end - p >= 16; p += 16) {
    __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    int mask = _mm_movemask_epi8(
        _mm_or_si128(_mm_cmpeq_epi8(chunk, quote), _mm_cmpeq_epi8(chunk, backslash)));
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
  }
#endif
  for (; p < end; ++p)
    if (*p == '"' || *p == '\\') return p;
  return end;
}

class Json {
 public:
  Json(std::string_view text, std::string& scratch)
      : p_(text.data()), end_(p_ + text.size()), scratch_(scratch) {}

  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r' || *p_ == '\n')) ++p_;
  }
  bool eat(char c) {
    ws();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  char peek() {
    ws();
    return p_ < end_ ? *p_ : '\0';
  }
  bool at_end() {
    ws();
    return p_ == end_;
  }

  // A string; views into the line when it has no escapes, else into the scratch buffer.
  bool string(std::string_view& out) {
    if (!eat('"')) return false;
    const char* start = p_;
    const char* stop = special(p_, end_);  // the closing quote, or a backslash before it
    if (stop == end_) return false;
    if (*stop == '"') {  // the common case by far: no escapes, no copy
      out = std::string_view(start, static_cast<std::size_t>(stop - start));
      p_ = stop + 1;
      return true;
    }
    const char* escape = stop;
    p_ = escape;
    const std::size_t from = scratch_.size();
    scratch_.append(start, p_);
    while (p_ < end_ && *p_ != '"') {
      if (*p_ != '\\') {
        scratch_ += *p_++;
        continue;
      }
      if (++p_ == end_) return false;
      char c = *p_++;
      switch (c) {
        case '"':
        case '\\':
        case '/':
          scratch_ += c;
          break;
        case 'b':
          scratch_ += '\b';
          break;
        case 'f':
          scratch_ += '\f';
          break;
        case 'n':
          scratch_ += '\n';
          break;
        case 'r':
          scratch_ += '\r';
          break;
        case 't':
          scratch_ += '\t';
          break;
        case 'u': {
          unsigned cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair
            unsigned low = 0;
            if (end_ - p_ < 6 || p_[0] != '\\' || p_[1] != 'u') return false;
            p_ += 2;
            if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          utf8(cp);
          break;
        }
        default:
          return false;
      }
    }
    if (p_ == end_) return false;
    ++p_;
    out = std::string_view(scratch_.data() + from, scratch_.size() - from);
    return true;
  }

  bool number(double& out) {
    ws();
    const char* start = p_;
    auto numeric = [](char c) {
      return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
    };
    while (p_ < end_ && numeric(*p_)) ++p_;
    auto [q, ec] = std::from_chars(start, p_, out);
    return ec == std::errc{} && q == p_;
  }

  // Skips any value (nesting bounded, so a hostile line cannot recurse deeply).
  bool skip(int depth = 0) {
    if (depth > 32) return false;
    char c = peek();
    if (c == '"') {
      std::string_view ignored;
      return string(ignored);
    }
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++p_;
      if (eat(close)) return true;
      do {
        if (c == '{') {
          std::string_view key;
          if (!string(key) || !eat(':')) return false;
        }
        if (!skip(depth + 1)) return false;
      } while (eat(','));
      return eat(close);
    }
    const char* start = p_;
    while (p_ < end_ && *p_ != ',' && *p_ != '}' && *p_ != ']' && *p_ != ' ') ++p_;
    return p_ > start;
  }

  // {"name":"value",...} with string values, each handed to `fn`.
  template <typename Fn>
  bool string_map(Fn&& fn) {
    if (!eat('{')) return false;
    if (eat('}')) return true;
    do {
      std::string_view k, v;
      if (!string(k) || !eat(':')) return false;
      if (peek() == '"') {
        if (!string(v)) return false;
        fn(k, v);
      } else if (!skip()) {
        return false;
      }
    } while (eat(','));
    return eat('}');
  }

 private:
  bool hex4(unsigned& out) {
    if (end_ - p_ < 4) return false;
    out = 0;
    for (int i = 0; i < 4; ++i) {
      char c = *p_++;
      out <<= 4;
      if (c >= '0' && c <= '9')
        out |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        out |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        out |= static_cast<unsigned>(c - 'A' + 10);
      else
        return false;
    }
    return true;
  }
  void utf8(unsigned cp) {
    if (cp < 0x80) {
      scratch_ += static_cast<char>(cp);
    } else if (cp < 0x800) {
      scratch_ += static_cast<char>(0xC0 | (cp >> 6));
      scratch_ += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      scratch_ += static_cast<char>(0xE0 | (cp >> 12));
      scratch_ += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      scratch_ += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      scratch_ += static_cast<char>(0xF0 | (cp >> 18));
      scratch_ += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      scratch_ += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      scratch_ += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  const char* p_;
  const char* end_;
  std::string& scratch_;
};

ParseResult bad(std::string_view why) {
  return {LineKind::bad, why};
}

}  // namespace

ParseResult parse_access_json(std::string_view line, LogRecord& out, std::string& scratch) {
  // Unescaped strings are never longer than the line: with this much room the scratch
  // buffer never moves, so views into it stay valid.
  scratch.clear();
  scratch.reserve(line.size());
  out.clear();
  Json j(line, scratch);
  if (!j.eat('{')) return bad("not a JSON object");
  bool is_access = false, has_ts = false;
  std::string_view decision;
  if (!j.eat('}')) {
    do {
      std::string_view key;
      if (!j.string(key) || !j.eat(':')) return bad("malformed JSON");
      std::string_view v;
      if (key == "type") {
        if (!j.string(v)) return bad("malformed JSON");
        is_access = v == "access";
      } else if (key == "ts") {
        if (!j.string(v)) return bad("malformed JSON");
        if (!limit::parse_utc(v, out.at)) return bad("unreadable ts");
        has_ts = true;
      } else if (key == "method") {
        if (!j.string(out.method)) return bad("malformed JSON");
      } else if (key == "path") {
        if (!j.string(out.path)) return bad("malformed JSON");
      } else if (key == "peer") {
        if (!j.string(out.peer)) return bad("malformed JSON");
      } else if (key == "decision") {
        if (!j.string(decision)) return bad("malformed JSON");
      } else if (key == "status" || key == "duration_ms") {
        double n = 0;
        if (!j.number(n)) return bad("malformed JSON");
        // Out-of-range numbers are a bad line, not a conversion with undefined behaviour
        // (found by fuzz_log_line). A day is longer than any request holds a lease.
        if (key == "status") {
          if (!(n >= 0 && n < 1000)) return bad("status out of range");
          out.status = static_cast<int>(n);
        } else {
          if (!(n >= 0 && n <= 86'400'000.0)) return bad("duration_ms out of range");
          out.duration_us = static_cast<std::int64_t>(n * 1000.0);
        }
      } else if (key == "fields") {
        out.has_fields = true;
        bool ok = j.string_map([&](std::string_view k, std::string_view value) {
          if (k == "ip")
            out.client = value;
          else if (k == "host")
            out.host = value;
          else
            out.fields.emplace_back(k, value);
        });
        if (!ok) return bad("malformed JSON");
      } else if (key == "settle") {
        bool ok = j.string_map(
            [&](std::string_view k, std::string_view value) { out.settle.emplace_back(k, value); });
        if (!ok) return bad("malformed JSON");
      } else if (!j.skip()) {
        return bad("malformed JSON");
      }
    } while (j.eat(','));
    if (!j.eat('}')) return bad("malformed JSON");
  }
  if (!j.at_end()) return bad("text after the JSON object");
  if (!is_access) return {LineKind::skipped, "not an access line"};
  if (!has_ts) return bad("no ts (logged before floodgate recorded timestamps?)");
  if (out.method.empty() || out.path.empty()) return bad("no method or path");
  out.live_refused = decision == "limited";
  return {LineKind::request, {}};
}

ParseResult parse_nginx_combined(std::string_view s, LogRecord& out) {
  out.clear();
  auto space = s.find(' ');
  if (space == std::string_view::npos || space == 0) return bad("not a combined log line");
  out.client = s.substr(0, space);
  auto open = s.find('[', space);
  auto close = s.find(']', open);
  if (open == std::string_view::npos || close == std::string_view::npos) return bad("no [time]");
  // 30/Nov/2026:05:10:50 +0000
  auto t = s.substr(open + 1, close - open - 1);
  static constexpr std::string_view months = "JanFebMarAprMayJunJulAugSepOctNovDec";
  int d, y, h, mi, sec, oh, om;
  if (t.size() != 26 || !limit::fixed_digits(t, 0, 2, d) || t[2] != '/' || t[6] != '/' ||
      !limit::fixed_digits(t, 7, 4, y) || t[11] != ':' || !limit::fixed_digits(t, 12, 2, h) ||
      t[14] != ':' || !limit::fixed_digits(t, 15, 2, mi) || t[17] != ':' ||
      !limit::fixed_digits(t, 18, 2, sec) || t[20] != ' ' || (t[21] != '+' && t[21] != '-') ||
      !limit::fixed_digits(t, 22, 2, oh) || !limit::fixed_digits(t, 24, 2, om))
    return bad("unreadable [time]");
  auto m = months.find(t.substr(3, 3));
  if (m == std::string_view::npos || m % 3 != 0) return bad("unreadable [time]");
  const int mo = static_cast<int>(m / 3) + 1;
  if (!valid_date(mo, d, h, mi, sec)) return bad("unreadable [time]");
  out.at = limit::micros_of(y, mo, d, h, mi, sec) -
           (oh * 3600 + om * 60) * limit::kMicrosPerSecond * (t[21] == '+' ? 1 : -1);

  // "GET /path?q HTTP/1.1" status bytes "referer" "agent"
  auto q1 = s.find('"', close);
  auto q2 = q1 == std::string_view::npos ? q1 : s.find('"', q1 + 1);
  if (q2 == std::string_view::npos) return bad("no \"request\"");
  auto request = s.substr(q1 + 1, q2 - q1 - 1);
  auto sp1 = request.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : request.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp1 == 0) return {LineKind::skipped, "no request line"};
  out.method = request.substr(0, sp1);
  auto target = request.substr(sp1 + 1, sp2 == std::string_view::npos ? sp2 : sp2 - sp1 - 1);
  // Split as the proxy splits a target; an absolute form's authority names the host, as
  // for the proxy (spelled as the proxy's keys spell it: uri::host_name).
  auto split = uri::split_target(target);
  if (!split) return {LineKind::skipped, "not an origin-form target"};
  if (!split->authority.empty()) out.host = uri::host_name(split->authority);
  out.path = split->path;
  out.query = split->query;
  auto rest = s.substr(q2 + 1);
  std::size_t i = 0;
  while (i < rest.size() && rest[i] == ' ') ++i;
  int status = 0;
  if (!limit::fixed_digits(rest, i, 3, status)) return bad("no status");
  out.status = status;
  // The two quoted fields that follow, when present.
  auto r1 = rest.find('"', i + 3);
  auto r2 = r1 == std::string_view::npos ? r1 : rest.find('"', r1 + 1);
  if (r2 != std::string_view::npos) {
    auto referer = rest.substr(r1 + 1, r2 - r1 - 1);
    if (referer != "-") out.fields.emplace_back("header:referer", referer);
    auto a1 = rest.find('"', r2 + 1);
    auto a2 = a1 == std::string_view::npos ? a1 : rest.find('"', a1 + 1);
    if (a2 != std::string_view::npos) {
      auto agent = rest.substr(a1 + 1, a2 - a1 - 1);
      if (agent != "-") out.fields.emplace_back("header:user-agent", agent);
    }
  }
  return {LineKind::request, {}};
}

}  // namespace floodgate::replay
