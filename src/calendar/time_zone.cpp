#include "floodgate/calendar/time_zone.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>

#include "floodgate/calendar/civil.hpp"

namespace floodgate::calendar {

namespace {

constexpr std::int64_t kLastRuleYear = 2200;  // the footer's rule is written out up to here
// ... and from here at the earliest: a file whose last transition is far in the past (a
// damaged or hostile one may put it at -2^63 s, 292 billion years ago) would otherwise have
// the rule written out year by year for as long. Quotas ask about the present.
constexpr std::int64_t kFirstRuleYear = 1900;

// ---- the footer: a POSIX TZ string (RFC 8536 section 3.3, with its extensions) ------------

// A rule's date: Jn (1-365, February 29 never counted), n (0-365, counted) or Mm.w.d (day d,
// 0 = Sunday, of week w, 5 = the last, of month m), and the wall-clock time of the change.
struct RuleDate {
  char kind = 'M';
  int a = 0, b = 0, c = 0;
  Seconds time = 2 * 3600;
};

struct PosixRule {
  std::int32_t std_offset = 0;  // UTC offsets, east positive (POSIX writes them west positive)
  bool has_dst = false;
  std::int32_t dst_offset = 0;
  RuleDate start, end;  // when daylight time starts (standard wall clock) and ends (daylight)
};

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool done() const { return i_ >= s_.size(); }
  char peek() const { return done() ? '\0' : s_[i_]; }
  bool take(char ch) {
    if (peek() != ch) return false;
    ++i_;
    return true;
  }
  // Up to `max_digits` digits as a number; false when there is none.
  bool number(int max_digits, int& out) {
    int n = 0, v = 0;
    while (n < max_digits && peek() >= '0' && peek() <= '9') v = v * 10 + (s_[i_++] - '0'), ++n;
    out = v;
    return n > 0;
  }
  // A zone abbreviation: three or more letters, or <anything but '>'> ("<+03>").
  bool name() {
    if (take('<')) {
      while (!done() && peek() != '>') ++i_;
      return take('>');
    }
    std::size_t from = i_;
    while (!done() && ((peek() | 0x20) >= 'a' && (peek() | 0x20) <= 'z')) ++i_;
    return i_ - from >= 3;
  }
  // [+-]hh[:mm[:ss]], hours up to `max_hours`.
  bool hms(int max_hours, Seconds& out) {
    int sign = 1;
    if (take('-'))
      sign = -1;
    else
      take('+');
    int h = 0, m = 0, sec = 0;
    if (!number(3, h) || h > max_hours) return false;
    if (take(':') && (!number(2, m) || m > 59)) return false;
    if (take(':') && (!number(2, sec) || sec > 59)) return false;
    out = sign * (h * 3600 + m * 60 + sec);
    return true;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

bool rule_date(Cursor& c, RuleDate& d) {
  if (c.take('J')) {
    d.kind = 'J';
    if (!c.number(3, d.a) || d.a < 1 || d.a > 365) return false;
  } else if (c.take('M')) {
    d.kind = 'M';
    if (!c.number(2, d.a) || d.a < 1 || d.a > 12 || !c.take('.') || !c.number(1, d.b) || d.b < 1 ||
        d.b > 5 || !c.take('.') || !c.number(1, d.c) || d.c > 6)
      return false;
  } else {
    d.kind = 'n';
    if (!c.number(3, d.a) || d.a > 365) return false;
  }
  if (c.take('/')) return c.hms(167, d.time);
  return true;
}

bool parse_posix(std::string_view text, PosixRule& r) {
  Cursor c(text);
  Seconds off = 0;
  if (!c.name() || !c.hms(24, off)) return false;
  r.std_offset = static_cast<std::int32_t>(-off);
  if (c.done()) return true;
  if (!c.name()) return false;
  r.has_dst = true;
  r.dst_offset = r.std_offset + 3600;
  if (c.peek() != ',' && !c.done()) {
    if (!c.hms(24, off)) return false;
    r.dst_offset = static_cast<std::int32_t>(-off);
  }
  if (c.done()) {  // no rule: POSIX leaves it to the implementation; the US rule, as glibc
    r.start = RuleDate{'M', 3, 2, 0};
    r.end = RuleDate{'M', 11, 1, 0};
    return true;
  }
  return c.take(',') && rule_date(c, r.start) && c.take(',') && rule_date(c, r.end) && c.done();
}

// The day number of a rule's date in `year`.
std::int64_t rule_day(const RuleDate& d, std::int64_t year) {
  const std::int64_t jan1 = days_from_civil(year, 1, 1);
  if (d.kind == 'J') return jan1 + d.a - 1 + (is_leap(year) && d.a >= 60 ? 1 : 0);
  if (d.kind == 'n') return jan1 + d.a;
  const std::int64_t first = days_from_civil(year, d.a, 1);
  const int sunday_based = iso_weekday(first) % 7;
  std::int64_t day = first + (d.c - sunday_based + 7) % 7 + 7 * (d.b - 1);
  while (day >= first + days_in_month(year, d.a)) day -= 7;  // week 5: the last one
  return day;
}

// ---- the file --------------------------------------------------------------------------

struct Counts {
  std::int64_t isut = 0, isstd = 0, leap = 0, time = 0, type = 0, chars = 0;
  std::int64_t data_size(int time_size) const {
    return time * time_size + time + type * 6 + chars + leap * (time_size + 4) + isstd + isut;
  }
};

std::int64_t big_endian(std::string_view b, std::size_t pos, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(b[pos + i]);
  if (n == 4) return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
  return static_cast<std::int64_t>(v);
}

bool header(std::string_view b, std::size_t pos, char& version, Counts& n) {
  if (b.size() < pos + 44 || b.substr(pos, 4) != "TZif") return false;
  version = b[pos + 4];
  n = Counts{big_endian(b, pos + 20, 4), big_endian(b, pos + 24, 4), big_endian(b, pos + 28, 4),
             big_endian(b, pos + 32, 4), big_endian(b, pos + 36, 4), big_endian(b, pos + 40, 4)};
  const std::int64_t limit = 1 << 20;
  return n.isut >= 0 && n.isstd >= 0 && n.leap >= 0 && n.time >= 0 && n.type >= 1 && n.chars >= 0 &&
         n.isut < limit && n.isstd < limit && n.leap < limit && n.time < limit && n.type <= 256 &&
         n.chars < limit;
}

}  // namespace

struct TzifReader {
  static std::variant<TimeZone, std::string> read(std::string_view b, std::string name) {
    char version = 0;
    Counts n;
    if (!header(b, 0, version, n)) return std::string("not a TZif file");
    std::size_t pos = 44;
    int time_size = 4;
    if (version != '\0') {  // version 2 or later: skip the 32-bit block to the 64-bit one
      pos += static_cast<std::size_t>(n.data_size(4));
      if (!header(b, pos, version, n)) return std::string("a TZif file cut short");
      pos += 44;
      time_size = 8;
    }
    if (b.size() < pos + static_cast<std::size_t>(n.data_size(time_size)))
      return std::string("a TZif file cut short");
    if (n.leap > 0) return std::string("a zone counting leap seconds (a right/ zone)");
    TimeZone z;
    z.name_ = std::move(name);
    const std::size_t times = pos, indices = times + static_cast<std::size_t>(n.time * time_size),
                      types = indices + static_cast<std::size_t>(n.time);
    auto type_offset = [&](std::int64_t t) {
      return static_cast<std::int32_t>(big_endian(b, types + static_cast<std::size_t>(t) * 6, 4));
    };
    // RFC 8536: offsets within -25 and +26 hours (the lookups rely on it).
    for (std::int64_t t = 0; t < n.type; ++t)
      if (type_offset(t) < -25 * 3600 || type_offset(t) > 26 * 3600)
        return std::string("a UTC offset beyond 26 hours");
    z.initial_ = type_offset(0);  // RFC 8536: before the first transition, type 0
    for (std::int64_t i = 0; i < n.time; ++i) {
      const auto at = big_endian(b, times + static_cast<std::size_t>(i * time_size), time_size);
      const auto t = static_cast<unsigned char>(b[indices + static_cast<std::size_t>(i)]);
      if (t >= n.type) return std::string("a transition to a type the file does not have");
      if (!z.at_.empty() && at <= z.at_.back()) return std::string("transitions out of order");
      z.at_.push_back(at);
      z.offset_.push_back(type_offset(t));
    }
    pos += static_cast<std::size_t>(n.data_size(time_size));
    if (time_size == 8 && pos < b.size() && b[pos] == '\n') {
      auto end = b.find('\n', pos + 1);
      if (end == std::string_view::npos) return std::string("a footer without its newline");
      auto footer = b.substr(pos + 1, end - pos - 1);
      if (!footer.empty()) {
        PosixRule rule;
        if (!parse_posix(footer, rule))
          return "a footer rule it cannot read (\"" + std::string(footer) + "\")";
        extend(z, rule);
      }
    }
    return z;
  }

  // The footer's rule written out from the year of the last transition on.
  static void extend(TimeZone& z, const PosixRule& rule) {
    if (!rule.has_dst) {
      if (z.at_.empty()) z.initial_ = rule.std_offset;
      return;
    }
    const std::int64_t from_year = std::max(
        kFirstRuleYear,
        z.at_.empty() ? 1970 : civil_from_days(floor_div(z.at_.back(), kSecondsPerDay)).year);
    for (std::int64_t y = from_year; y <= kLastRuleYear; ++y) {
      std::pair<Seconds, std::int32_t> change[2] = {
          {rule_day(rule.start, y) * kSecondsPerDay + rule.start.time - rule.std_offset,
           rule.dst_offset},
          {rule_day(rule.end, y) * kSecondsPerDay + rule.end.time - rule.dst_offset,
           rule.std_offset}};
      if (change[1].first < change[0].first) std::swap(change[0], change[1]);  // southern
      for (const auto& [at, offset] : change) {
        if (!z.at_.empty() && at <= z.at_.back()) continue;
        if ((z.at_.empty() ? z.initial_ : z.offset_.back()) == offset) continue;
        z.at_.push_back(at);
        z.offset_.push_back(offset);
      }
    }
  }
};

std::string TimeZone::default_dir() {
  const char* dir = std::getenv("TZDIR");
  return dir && *dir ? dir : "/usr/share/zoneinfo";
}

std::variant<TimeZone, std::string> TimeZone::parse(std::string_view bytes, std::string name) {
  return TzifReader::read(bytes, std::move(name));
}

std::variant<TimeZone, std::string> TimeZone::load(std::string_view name, const std::string& dir) {
  // A zone name is a relative path of letters, digits and - _ + (IANA's rules); nothing
  // that could leave the directory.
  bool ok = !name.empty() && name.front() != '/' && name.back() != '/' &&
            name.find("..") == std::string_view::npos;
  for (char ch : name)
    ok = ok && (((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z') || (ch >= '0' && ch <= '9') ||
                ch == '/' || ch == '_' || ch == '-' || ch == '+');
  if (!ok)
    return "\"" + std::string(name) + "\" is not an IANA time zone name (like Europe/Berlin)";
  const std::string path = dir + "/" + std::string(name);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (name == "UTC") return TimeZone();  // no tzdata at all: UTC still works
    return "unknown time zone \"" + std::string(name) + "\" (no " + path + ")";
  }
  std::string bytes;
  bytes.resize(1 << 20);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  auto z = parse(bytes, std::string(name));
  if (auto* error = std::get_if<std::string>(&z)) return path + ": " + *error;
  return z;
}

std::int32_t TimeZone::offset_at(Seconds utc) const {
  auto it = std::upper_bound(at_.begin(), at_.end(), utc);
  return it == at_.begin() ? initial_ : offset_[static_cast<std::size_t>(it - at_.begin() - 1)];
}

Seconds TimeZone::first_at_or_after(Seconds local) const {
  // Each stretch between transitions has one offset, and in it the wall clock only runs
  // forward: its first instant showing `local` or later is max(start, local - offset). The
  // answer is the earliest of those over the stretches near `local` (offsets are within a
  // day and a bit of UTC).
  constexpr Seconds kNear = 2 * kSecondsPerDay;
  const auto first = std::upper_bound(at_.begin(), at_.end(), local - kNear) - at_.begin();
  Seconds best = std::numeric_limits<Seconds>::max();
  for (auto k = first - 1; k < static_cast<std::ptrdiff_t>(at_.size()); ++k) {
    const Seconds begin =
        k < 0 ? std::numeric_limits<Seconds>::min() : at_[static_cast<std::size_t>(k)];
    if (begin > local + kNear) break;
    const Seconds end = k + 1 < static_cast<std::ptrdiff_t>(at_.size())
                            ? at_[static_cast<std::size_t>(k + 1)]
                            : std::numeric_limits<Seconds>::max();
    const std::int32_t offset = k < 0 ? initial_ : offset_[static_cast<std::size_t>(k)];
    const Seconds u = std::max(begin, local - offset);
    if (u < end) best = std::min(best, u);
  }
  return best == std::numeric_limits<Seconds>::max() ? local - offset_at(local) : best;
}

}  // namespace floodgate::calendar
