#pragma once
// IANA time zones read from the system's TZif files (RFC 8536; Debian's tzdata under
// /usr/share/zoneinfo): GCC 12's libstdc++ has no std::chrono time zones. Only what calendar
// quotas need: the UTC offset at an instant, and the first instant at a local wall-clock time.
//
// A zone is a table of transitions: the file's own, then its footer's POSIX TZ rule
// ("CET-1CEST,M3.5.0,M10.5.0/3") written out year by year to 2200, so a lookup is one binary
// search and the rule is never evaluated per request.

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace floodgate::calendar {

using Seconds = std::int64_t;  // Unix seconds

class TimeZone {
 public:
  // UTC: no transitions.
  TimeZone() = default;

  // The zone `name` ("Europe/Berlin", "UTC") from `dir` (the TZDIR environment variable's
  // directory, else /usr/share/zoneinfo). The error says what is wrong.
  static std::variant<TimeZone, std::string> load(std::string_view name, const std::string& dir);
  // The zone in the bytes of a TZif file.
  static std::variant<TimeZone, std::string> parse(std::string_view bytes, std::string name);
  // Where zones are read from: $TZDIR, else /usr/share/zoneinfo.
  static std::string default_dir();

  const std::string& name() const { return name_; }
  // Local wall-clock time = utc + offset_at(utc).
  std::int32_t offset_at(Seconds utc) const;
  // The first instant whose wall-clock time is at or after `local` (seconds since 1970-01-01
  // 00:00 on the wall clock). Where the clock skips `local` (a gap: spring forward) that is
  // the end of the gap; where it shows it twice (fall back) the first time.
  Seconds first_at_or_after(Seconds local) const;

 private:
  std::string name_ = "UTC";
  std::int32_t initial_ = 0;          // before the first transition
  std::vector<Seconds> at_;           // transitions, ascending
  std::vector<std::int32_t> offset_;  // in effect from at_[i] until at_[i + 1]
  friend struct TzifReader;
};

}  // namespace floodgate::calendar
