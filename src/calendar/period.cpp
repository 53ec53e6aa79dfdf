#include "floodgate/calendar/period.hpp"

#include <algorithm>

#include "floodgate/calendar/civil.hpp"

namespace floodgate::calendar {

namespace {

constexpr std::int64_t kMicros = 1'000'000;

// The day number of the first day of the period `step` periods after the one whose first
// day is on or before `day` (step 0: that period; -1 the one before, 1 the one after).
std::int64_t first_day(const Period& p, std::int64_t day, int step) {
  switch (p.unit) {
    case PeriodUnit::day:
      return day + step;
    case PeriodUnit::week:
      return day - (iso_weekday(day) - p.anchor + 7) % 7 + 7 * step;
    case PeriodUnit::month: {
      const Date d = civil_from_days(day);
      // Months since year 0 of the period's first day: this month's, or the one before when
      // `day` comes before this month's anchor.
      std::int64_t m = d.year * 12 + (d.month - 1);
      if (d.day < std::min(p.anchor, days_in_month(d.year, d.month))) --m;
      m += step;
      const std::int64_t y = floor_div(m, 12);
      const int month = static_cast<int>(m - y * 12) + 1;
      return days_from_civil(y, month, std::min(p.anchor, days_in_month(y, month)));
    }
  }
  return day;
}

}  // namespace

const char* to_string(PeriodUnit u) {
  switch (u) {
    case PeriodUnit::day:
      return "day";
    case PeriodUnit::week:
      return "week";
    case PeriodUnit::month:
      return "month";
  }
  return "?";
}

Span Period::at(std::int64_t now) const {
  static const TimeZone utc;
  const TimeZone& z = zone ? *zone : utc;
  const Seconds t = floor_div(now, kMicros);
  const std::int64_t today = floor_div(t + z.offset_at(t), kSecondsPerDay);
  auto start_of = [&](std::int64_t day) {
    return z.first_at_or_after(day * kSecondsPerDay) * kMicros;
  };
  // The period whose first day holds today's wall-clock date; where a clock set back across
  // midnight shows yesterday's date again, the instant decides (a step either way).
  int step = 0;
  Span s{start_of(first_day(*this, today, 0)), start_of(first_day(*this, today, 1))};
  for (int i = 0; i < 2 && now >= s.end; ++i)
    s = Span{s.end, start_of(first_day(*this, today, ++step + 1))};
  for (int i = 0; i < 2 && now < s.start; ++i)
    s = Span{start_of(first_day(*this, today, --step)), s.start};
  return s;
}

std::string Period::describe() const {
  static const char* const weekdays[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                         "Friday", "Saturday", "Sunday"};
  std::string out = to_string(unit);
  if (unit == PeriodUnit::month && anchor != 1) out += " from day " + std::to_string(anchor);
  if (unit == PeriodUnit::week) out += std::string(" from ") + weekdays[(anchor - 1) % 7];
  out += ", ";
  out += zone ? zone->name() : "UTC";
  return out;
}

}  // namespace floodgate::calendar
