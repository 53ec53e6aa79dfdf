#pragma once
// Proleptic Gregorian dates as day numbers (days since 1970-01-01) and back: the arithmetic
// under the access log's timestamps and calendar quotas' periods. No time zone here.

#include <cstdint>

namespace floodgate::calendar {

struct Date {
  std::int64_t year = 1970;
  int month = 1;  // 1-12
  int day = 1;    // 1-31
};

// Days since 1970-01-01 (H. Hinnant's days_from_civil). Month and day must be in range.
constexpr std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<std::int64_t>(y - era * 400);
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}
constexpr std::int64_t days_from_civil(const Date& d) {
  return days_from_civil(d.year, d.month, d.day);
}

// The date `days` after 1970-01-01 (its inverse).
constexpr Date civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const std::int64_t doe = z - era * 146097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  const int d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  return Date{yoe + era * 400 + (m <= 2), m, d};
}

constexpr bool is_leap(std::int64_t y) {
  return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}
constexpr int days_in_month(std::int64_t y, int m) {
  constexpr int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

// ISO weekday of a day number: 1 Monday ... 7 Sunday (1970-01-01 was a Thursday).
constexpr int iso_weekday(std::int64_t days) {
  return static_cast<int>(((days % 7) + 7 + 3) % 7) + 1;
}

// floor(a / b) for b > 0: day numbers of instants before 1970 round down, not toward zero.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

constexpr std::int64_t kSecondsPerDay = 86400;

}  // namespace floodgate::calendar
