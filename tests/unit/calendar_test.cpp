// Time zones from tzdata's TZif files and the calendar periods of quotas: checked against
// dates Python's zoneinfo (the same tzdata) gives, DST days and month ends included.
#include <gtest/gtest.h>

#include <cstdlib>

#include "floodgate/calendar/civil.hpp"
#include "floodgate/calendar/period.hpp"
#include "floodgate/limit/utc_time.hpp"

namespace floodgate::calendar {
namespace {

std::shared_ptr<const TimeZone> zone(const char* name) {
  auto z = TimeZone::load(name, TimeZone::default_dir());
  if (auto* error = std::get_if<std::string>(&z)) {
    ADD_FAILURE() << *error;
    return std::make_shared<const TimeZone>();
  }
  return std::make_shared<const TimeZone>(std::get<TimeZone>(std::move(z)));
}

Seconds utc(int y, int mo, int d, int h = 0, int mi = 0) {
  return limit::micros_of(y, mo, d, h, mi, 0) / 1'000'000;
}
std::int64_t micros(int y, int mo, int d, int h = 0, int mi = 0) {
  return limit::micros_of(y, mo, d, h, mi, 0);
}

TEST(Civil, DaysAndDatesRoundTrip) {
  for (std::int64_t day = -800'000; day <= 800'000; day += 997) {
    const Date d = civil_from_days(day);
    EXPECT_EQ(days_from_civil(d), day);
  }
  EXPECT_EQ(days_from_civil(2024, 2, 29) + 1, days_from_civil(2024, 3, 1));
  EXPECT_EQ(iso_weekday(days_from_civil(2026, 12, 3)), 4);  // a Thursday
  EXPECT_EQ(days_in_month(2100, 2), 28);
  EXPECT_EQ(days_in_month(2000, 2), 29);
}

TEST(TimeZone, BerlinOffsetsAcrossItsDstChanges) {
  auto berlin = zone("Europe/Berlin");
  EXPECT_EQ(berlin->offset_at(utc(2026, 3, 29, 0, 59)), 3600);
  EXPECT_EQ(berlin->offset_at(utc(2026, 3, 29, 1, 0)), 7200);  // 02:00 -> 03:00 local
  EXPECT_EQ(berlin->offset_at(utc(2026, 10, 25, 0, 59)), 7200);
  EXPECT_EQ(berlin->offset_at(utc(2026, 10, 25, 1, 0)), 3600);  // 03:00 -> 02:00 local
  // Past the file's transitions (2037): the footer's rule, written out.
  EXPECT_EQ(berlin->offset_at(utc(2150, 7, 1)), 7200);
  EXPECT_EQ(berlin->offset_at(utc(2150, 12, 1)), 3600);
  // Before 1893 Berlin kept local mean time (+0:53:28).
  EXPECT_EQ(berlin->offset_at(utc(1850, 1, 1)), 3208);
}

TEST(TimeZone, AWallClockTimeSkippedOrShownTwiceMapsToItsFirstInstant) {
  auto berlin = zone("Europe/Berlin");
  const Seconds local_0230 = utc(2026, 3, 29, 2, 30);  // as a wall-clock reading
  EXPECT_EQ(berlin->first_at_or_after(local_0230), utc(2026, 3, 29, 1, 0));  // gap: its end
  const Seconds fall_0230 = utc(2026, 10, 25, 2, 30);
  EXPECT_EQ(berlin->first_at_or_after(fall_0230), utc(2026, 10, 25, 0, 30));  // the first one
  EXPECT_EQ(berlin->first_at_or_after(utc(2026, 7, 1)), utc(2026, 6, 30, 22, 0));
}

TEST(TimeZone, NamesThatAreNotZonesAreRefusedWithTheReason) {
  auto missing = TimeZone::load("Europe/Berln", TimeZone::default_dir());
  ASSERT_TRUE(std::holds_alternative<std::string>(missing));
  EXPECT_NE(std::get<std::string>(missing).find("unknown time zone \"Europe/Berln\""),
            std::string::npos);
  for (const char* bad : {"../../etc/passwd", "/etc/localtime", "", "Europe/"}) {
    auto z = TimeZone::load(bad, TimeZone::default_dir());
    ASSERT_TRUE(std::holds_alternative<std::string>(z)) << bad;
    EXPECT_NE(std::get<std::string>(z).find("not an IANA time zone name"), std::string::npos);
  }
  EXPECT_TRUE(std::holds_alternative<std::string>(TimeZone::parse("not tzif", "x")));
  EXPECT_TRUE(std::holds_alternative<std::string>(TimeZone::parse("TZif2", "x")));
  // Without tzdata at all, UTC still loads.
  EXPECT_TRUE(std::holds_alternative<TimeZone>(TimeZone::load("UTC", "/nonexistent")));
}

// A slim TZif file (no transitions, only the footer) as zic -b slim writes one: the whole
// calendar comes from the POSIX rule, southern hemisphere here (daylight time over new year).
TEST(TimeZone, AFooterRuleAloneDescribesTheZone) {
  std::string file;
  auto header = [&](char version) {
    file += "TZif";
    file += version;
    file += std::string(15, '\0');
    const unsigned char counts[24] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                      0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 4};
    file.append(reinterpret_cast<const char*>(counts), 24);
    const unsigned char type[6] = {0x00, 0x00, 0x8c, 0xa0, 0, 0};  // +10:00, "AEST"
    file.append(reinterpret_cast<const char*>(type), 6);
    file += std::string("AES\0", 4);
  };
  header('2');
  header('2');
  file += "\nAEST-10AEDT,M10.1.0,M4.1.0/3\n";
  auto parsed = TimeZone::parse(file, "Test/Sydney");
  ASSERT_TRUE(std::holds_alternative<TimeZone>(parsed)) << std::get<std::string>(parsed);
  const auto& z = std::get<TimeZone>(parsed);
  auto sydney = zone("Australia/Sydney");
  for (Seconds t = utc(2026, 1, 1); t < utc(2029, 1, 1); t += 3 * 3600 + 17)
    ASSERT_EQ(z.offset_at(t), sydney->offset_at(t)) << t;
  EXPECT_EQ(z.offset_at(utc(2027, 4, 3, 15, 59)), 11 * 3600);  // 02:59 daylight
  EXPECT_EQ(z.offset_at(utc(2027, 4, 3, 16, 0)), 10 * 3600);   // 03:00 daylight -> 02:00
}

// The fuzz smoke's find: one transition 2^62 s before 1970 and a daylight rule had the rule
// written out for every year since (a loop of 146 billion years). The rule is written out
// from 1900 at the earliest, so the file reads at once and the present follows the rule.
TEST(TimeZone, ATransitionAgesAgoDoesNotWriteTheRuleOutSinceThen) {
  std::string file;
  auto header = [&](char version, int time_size) {
    file += "TZif";
    file += version;
    file += std::string(15, '\0');
    const unsigned char counts[24] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                      0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 4};
    file.append(reinterpret_cast<const char*>(counts), 24);
    // One transition, at -2^30 s (32-bit block) or -2^62 s (64-bit block), to type 0.
    std::string at(static_cast<std::size_t>(time_size), '\0');
    at[0] = static_cast<char>(0xc0);
    file += at;
    file += '\0';
    const unsigned char type[6] = {0x00, 0x00, 0x0e, 0x10, 0, 0};  // +01:00, "CET"
    file.append(reinterpret_cast<const char*>(type), 6);
    file += std::string("CET\0", 4);
  };
  header('2', 4);
  header('2', 8);
  file += "\nCET-1CEST,M3.5.0,M10.5.0/3\n";
  auto parsed = TimeZone::parse(file, "Test/Ancient");
  ASSERT_TRUE(std::holds_alternative<TimeZone>(parsed)) << std::get<std::string>(parsed);
  const auto& z = std::get<TimeZone>(parsed);
  auto berlin = zone("Europe/Berlin");
  for (Seconds t = utc(2026, 1, 1); t < utc(2028, 1, 1); t += 5 * 3600 + 17)
    ASSERT_EQ(z.offset_at(t), berlin->offset_at(t)) << t;
}

TEST(Period, ADayInBerlinIs23HoursWhenTheClocksGoForward) {
  Period p{PeriodUnit::day, 1, zone("Europe/Berlin")};
  auto s = p.at(micros(2026, 3, 29, 12, 0));
  EXPECT_EQ(s.start, micros(2026, 3, 28, 23, 0));  // local midnight, +01:00
  EXPECT_EQ(s.end, micros(2026, 3, 29, 22, 0));    // the next local midnight, +02:00
  s = p.at(micros(2026, 10, 25, 22, 59));
  EXPECT_EQ(s.end - s.start, 25LL * 3600 * 1'000'000);
  // Exactly at a boundary: the new period.
  EXPECT_EQ(p.at(micros(2026, 3, 29, 22, 0)).start, micros(2026, 3, 29, 22, 0));
  EXPECT_EQ(p.at(micros(2026, 3, 29, 21, 59)).start, micros(2026, 3, 28, 23, 0));
}

TEST(Period, WhereMidnightIsSkippedTheDayStartsWhenTheClockDoes) {
  // Chile moves its clocks at midnight: on 2026-09-06 the wall clock goes from 23:59:59 to
  // 01:00 (04:00 UTC), so that day starts at 01:00.
  Period p{PeriodUnit::day, 1, zone("America/Santiago")};
  auto s = p.at(micros(2026, 9, 6, 12, 0));
  EXPECT_EQ(s.start, micros(2026, 9, 6, 4, 0));
  EXPECT_EQ(s.end, micros(2026, 9, 7, 3, 0));
  // On April 5 the clock goes back from 00:00 to 23:00 on April 4 before it ever shows
  // April 5: April 4 lasts 25 hours and April 5 begins at the second midnight (04:00 UTC).
  s = p.at(micros(2026, 4, 5, 3, 30));
  EXPECT_EQ(s.start, micros(2026, 4, 4, 3, 0));
  EXPECT_EQ(s.end, micros(2026, 4, 5, 4, 0));
  EXPECT_EQ(p.at(micros(2026, 4, 5, 4, 0)).start, micros(2026, 4, 5, 4, 0));
}

TEST(Period, MonthsStartOnTheAnchorDayOrTheLastDayOfAShortMonth) {
  Period p{PeriodUnit::month, 1, nullptr};  // UTC
  auto s = p.at(micros(2026, 12, 31, 23, 59));
  EXPECT_EQ(s.start, micros(2026, 12, 1));
  EXPECT_EQ(s.end, micros(2027, 1, 1));
  Period billing{PeriodUnit::month, 31, zone("Europe/Berlin")};
  // Anchor 31: Jan 31 -> Feb 28 -> Mar 31 (local midnights, +01:00 then +02:00).
  s = billing.at(micros(2027, 2, 10));
  EXPECT_EQ(s.start, micros(2027, 1, 30, 23, 0));
  EXPECT_EQ(s.end, micros(2027, 2, 27, 23, 0));
  s = billing.at(micros(2027, 3, 15));
  EXPECT_EQ(s.start, micros(2027, 2, 27, 23, 0));
  EXPECT_EQ(s.end, micros(2027, 3, 30, 22, 0));
  Period fifteenth{PeriodUnit::month, 15, nullptr};
  s = fifteenth.at(micros(2027, 1, 14, 23, 59));
  EXPECT_EQ(s.start, micros(2026, 12, 15));
  EXPECT_EQ(s.end, micros(2027, 1, 15));
}

TEST(Period, WeeksStartOnTheirWeekday) {
  Period iso{PeriodUnit::week, 1, nullptr};
  auto s = iso.at(micros(2026, 12, 3, 10, 0));  // a Thursday
  EXPECT_EQ(s.start, micros(2026, 11, 30));     // Monday
  EXPECT_EQ(s.end, micros(2026, 12, 7));
  Period sunday{PeriodUnit::week, 7, zone("America/New_York")};
  s = sunday.at(micros(2026, 11, 4, 12, 0));      // a Wednesday; DST ended Sunday Nov 1
  EXPECT_EQ(s.start, micros(2026, 11, 1, 4, 0));  // midnight EDT (-4)
  EXPECT_EQ(s.end, micros(2026, 11, 8, 5, 0));    // midnight EST (-5): 7 days and an hour
}

TEST(Period, EveryInstantOfAYearFallsInExactlyOnePeriod) {
  for (const char* name : {"Europe/Berlin", "America/Santiago", "Australia/Lord_Howe", "UTC"}) {
    for (auto unit : {PeriodUnit::day, PeriodUnit::week, PeriodUnit::month}) {
      Period p{unit, unit == PeriodUnit::week ? 3 : 29, zone(name)};
      for (std::int64_t t = micros(2026, 1, 1); t < micros(2027, 1, 1); t += 3'599'000'000) {
        auto s = p.at(t);
        ASSERT_LE(s.start, t) << name << " " << to_string(unit) << " " << t;
        ASSERT_GT(s.end, t) << name << " " << to_string(unit) << " " << t;
        ASSERT_EQ(p.at(s.end).start, s.end) << name;
        ASSERT_EQ(p.at(s.start - 1).end, s.start) << name;
      }
    }
  }
}

TEST(Period, DescribesItself) {
  EXPECT_EQ((Period{PeriodUnit::month, 15, zone("Europe/Berlin")}.describe()),
            "month from day 15, Europe/Berlin");
  EXPECT_EQ((Period{PeriodUnit::week, 7, nullptr}.describe()), "week from Sunday, UTC");
  EXPECT_EQ((Period{PeriodUnit::day, 1, nullptr}.describe()), "day, UTC");
}

}  // namespace
}  // namespace floodgate::calendar
