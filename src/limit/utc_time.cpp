#include "floodgate/limit/utc_time.hpp"

#include <cstdio>
#include <ctime>

#include "floodgate/calendar/civil.hpp"

namespace floodgate::limit {

bool fixed_digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  out = v;
  return true;
}

Micros micros_of(int year, int month, int day, int hour, int minute, int second) {
  return (calendar::days_from_civil(year, month, day) * calendar::kSecondsPerDay + hour * 3600 +
          minute * 60 + second) *
         kMicrosPerSecond;
}

std::string format_utc(Micros t) {
  auto seconds = static_cast<std::time_t>(t / kMicrosPerSecond);
  auto micros = static_cast<long>(t % kMicrosPerSecond);
  if (micros < 0) micros += kMicrosPerSecond, --seconds;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char out[64];
  std::snprintf(out, sizeof out, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, micros);
  return out;
}

bool parse_utc(std::string_view s, Micros& out) {
  int y, mo, d, h, mi, sec;
  if (s.size() < 20 || !fixed_digits(s, 0, 4, y) || s[4] != '-' || !fixed_digits(s, 5, 2, mo) ||
      s[7] != '-' || !fixed_digits(s, 8, 2, d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      !fixed_digits(s, 11, 2, h) || s[13] != ':' || !fixed_digits(s, 14, 2, mi) || s[16] != ':' ||
      !fixed_digits(s, 17, 2, sec) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
      sec > 60)
    return false;
  std::size_t i = 19;
  Micros fraction = 0;
  if (i < s.size() && s[i] == '.') {
    Micros scale = 100000;
    int n = 0;
    for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++n) {
      fraction += (s[i] - '0') * scale;
      scale /= 10;
    }
    if (n == 0 || n > 9) return false;
  }
  Micros offset = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i + 6 == s.size() && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    int oh, om;
    if (!fixed_digits(s, i + 1, 2, oh) || !fixed_digits(s, i + 4, 2, om) || oh > 23 || om > 59)
      return false;
    offset = (oh * 3600 + om * 60) * kMicrosPerSecond * (s[i] == '+' ? 1 : -1);
    i += 6;
  } else {
    return false;
  }
  if (i != s.size()) return false;
  out = micros_of(y, mo, d, h, mi, sec) + fraction - offset;
  return true;
}

}  // namespace floodgate::limit
