// TZif files (calendar::TimeZone::parse) and the calendar periods built on them: the zone
// files come from the system's tzdata, trusted but not ours, so a damaged or hostile one must
// be refused with an error, never read out of bounds or loop. Seeds: a hand-made slim file
// (footer rule only) and, added by scripts/fuzz.sh, a few of the system's zones.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/calendar/period.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace floodgate::calendar;
  auto parsed =
      TimeZone::parse(std::string_view(reinterpret_cast<const char*>(data), size), "Fuzz/Zone");
  auto* zone = std::get_if<TimeZone>(&parsed);
  if (!zone) return 0;
  auto shared = std::make_shared<const TimeZone>(std::move(*zone));
  // 1901, 1970, 2026, 2099, 2300: before, inside and after the transitions and the rule.
  for (std::int64_t t :
       {-2'177'452'800LL, 0LL, 1'796'256'000LL, 4'102'444'799LL, 10'413'792'000LL}) {
    (void)shared->offset_at(t);
    (void)shared->first_at_or_after(t);
    for (auto unit : {PeriodUnit::day, PeriodUnit::week, PeriodUnit::month}) {
      const Period p{unit, unit == PeriodUnit::week ? 3 : 31, shared};
      (void)p.at(t * 1'000'000);
    }
  }
  return 0;
}
