// A quota's calendar period: `period`, `timezone` and `anchor_day` (load_routes.cpp reads the
// rest of the limit). The zone is read from tzdata here, once per load: a name it cannot find
// is an error in the config, not a surprise at the first request.
#include <array>

#include "sections.hpp"

namespace floodgate::config {

namespace {

constexpr std::array<std::string_view, 7> kWeekdays = {
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};

// week: a weekday's name, or its ISO number (1 Monday ... 7 Sunday).
std::optional<int> weekday(YamlReader& r, const YAML::Node& n, const std::string& path) {
  auto text = r.string(n, path);
  if (!text) return std::nullopt;
  std::string lower = *text;
  for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (std::size_t i = 0; i < kWeekdays.size(); ++i)
    if (lower == kWeekdays[i] || lower == std::to_string(i + 1)) return static_cast<int>(i) + 1;
  r.error(n, path, "expected the weekday a week starts, monday to sunday, got \"" + *text + "\"");
  return std::nullopt;
}

}  // namespace

std::shared_ptr<const calendar::Period> read_period(const Section& s, Algorithm a) {
  auto& r = s.reader();
  if (a != Algorithm::quota) {
    for (const char* key : {"period", "timezone", "anchor_day"})
      if (s.has(key))
        r.error(s[key], s.at(key),
                std::string("does not apply to ") + to_string(a) + " (a quota's calendar)");
    return nullptr;
  }
  if (!s.require("period")) return nullptr;
  calendar::Period p;
  s.choice<calendar::PeriodUnit>("period", p.unit,
                                 {{"day", calendar::PeriodUnit::day},
                                  {"week", calendar::PeriodUnit::week},
                                  {"month", calendar::PeriodUnit::month}});
  if (s.has("anchor_day")) {
    if (p.unit == calendar::PeriodUnit::month) {
      s.integer("anchor_day", p.anchor, 1, 31);
    } else if (p.unit == calendar::PeriodUnit::week) {
      if (auto d = weekday(r, s["anchor_day"], s.at("anchor_day"))) p.anchor = *d;
    } else {
      r.error(s["anchor_day"], s.at("anchor_day"),
              "applies to period week (the weekday it starts) or month (the day of the month)");
    }
  }
  std::string zone = "UTC";
  s.string("timezone", zone);
  auto loaded = calendar::TimeZone::load(zone, calendar::TimeZone::default_dir());
  if (auto* error = std::get_if<std::string>(&loaded)) {
    r.error(s.has("timezone") ? s["timezone"] : s.node(), s.at("timezone"), *error);
    return nullptr;
  }
  p.zone =
      std::make_shared<const calendar::TimeZone>(std::move(std::get<calendar::TimeZone>(loaded)));
  return std::make_shared<const calendar::Period>(std::move(p));
}

}  // namespace floodgate::config
