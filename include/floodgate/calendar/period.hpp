#pragma once
// Calendar periods for quotas (`algorithm: quota`): the day, week or month holding an
// instant, on a time zone's wall clock, from local midnight of its first day to local
// midnight of the next period's first day (DST included: a day may be 23 or 25 hours).

#include <cstdint>
#include <memory>
#include <string>

#include "floodgate/calendar/time_zone.hpp"

namespace floodgate::calendar {

enum class PeriodUnit { day, week, month };
const char* to_string(PeriodUnit u);

struct Span {
  std::int64_t start = 0;  // Unix microseconds, inclusive
  std::int64_t end = 0;    // exclusive: the next period's start
};

struct Period {
  PeriodUnit unit = PeriodUnit::month;
  // month: the day of the month a period starts (1-31; in a shorter month its last day);
  // week: the ISO weekday it starts (1 Monday ... 7 Sunday); day: unused.
  int anchor = 1;
  std::shared_ptr<const TimeZone> zone;  // null: UTC

  // The period holding `now` (Unix microseconds).
  Span at(std::int64_t now) const;
  // "month from day 15, Europe/Berlin": for summaries and /config.
  std::string describe() const;
};

}  // namespace floodgate::calendar
