#include "floodgate/config/units.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace floodgate::config {
namespace {

struct NumberAndUnit {
  double value = 0;
  std::string_view unit;
  bool ok = false;
};

// Splits "12.5ms" into 12.5 and "ms"; rejects signs, exponents and empty numbers so that
// "-1s" or "1e3s" are errors rather than surprises.
NumberAndUnit split(std::string_view text) {
  NumberAndUnit out;
  std::size_t i = 0;
  bool digits = false, dot = false;
  while (i < text.size()) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
    ++i;
  }
  if (!digits) return out;
  std::string number(text.substr(0, i));
  char* end = nullptr;
  out.value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return out;
  out.unit = text.substr(i);
  while (!out.unit.empty() && out.unit.front() == ' ') out.unit.remove_prefix(1);
  out.ok = true;
  return out;
}

}  // namespace

Parsed<Duration> parse_duration(std::string_view text) {
  auto nu = split(text);
  const std::string expected =
      "expected a duration with a unit (ms, s, m, h, d), e.g. \"45ms\" or \"10s\"";
  if (!nu.ok) return expected + ", got \"" + std::string(text) + "\"";
  double ms_per_unit = 0;
  if (nu.unit == "ms")
    ms_per_unit = 1;
  else if (nu.unit == "s")
    ms_per_unit = 1000;
  else if (nu.unit == "m")
    ms_per_unit = 60'000;
  else if (nu.unit == "h")
    ms_per_unit = 3'600'000;
  else if (nu.unit == "d")
    ms_per_unit = 86'400'000;
  else
    return expected + ", got \"" + std::string(text) + "\"";
  double ms = nu.value * ms_per_unit;
  if (ms > 1e13) return "duration \"" + std::string(text) + "\" is too long";
  if (ms != std::floor(ms)) return "duration \"" + std::string(text) + "\" is finer than 1ms";
  return Duration(static_cast<std::int64_t>(ms));
}

Parsed<std::uint64_t> parse_size(std::string_view text) {
  auto nu = split(text);
  const std::string expected = "expected a size such as 512, \"16KiB\" or \"10MiB\"";
  if (!nu.ok) return expected + ", got \"" + std::string(text) + "\"";
  double mult = 0;
  auto u = nu.unit;
  if (u.empty() || u == "B")
    mult = 1;
  else if (u == "KiB" || u == "KB" || u == "K" || u == "k")
    mult = 1024.0;
  else if (u == "MiB" || u == "MB" || u == "M" || u == "m")
    mult = 1024.0 * 1024;
  else if (u == "GiB" || u == "GB" || u == "G" || u == "g")
    mult = 1024.0 * 1024 * 1024;
  else
    return expected + ", got \"" + std::string(text) + "\"";
  double bytes = nu.value * mult;
  if (bytes > 1e15) return "size \"" + std::string(text) + "\" is too large";
  if (bytes != std::floor(bytes))
    return "size \"" + std::string(text) + "\" is not a whole number of bytes";
  return static_cast<std::uint64_t>(bytes);
}

Parsed<Rate> parse_rate(std::string_view text) {
  const std::string expected = "expected a rate such as \"10/s\", \"100/m\" or \"0.5/h\"";
  auto slash = text.find('/');
  if (slash == std::string_view::npos) return expected + ", got \"" + std::string(text) + "\"";
  // Spaces around the slash are allowed, as between a number and its unit ("10 s").
  auto nu = split(text.substr(0, slash));
  if (!nu.ok || !nu.unit.empty()) return expected + ", got \"" + std::string(text) + "\"";
  auto per = text.substr(slash + 1);
  while (!per.empty() && per.front() == ' ') per.remove_prefix(1);
  double seconds = 0;
  if (per == "s")
    seconds = 1;
  else if (per == "m")
    seconds = 60;
  else if (per == "h")
    seconds = 3600;
  else
    return expected + ", got \"" + std::string(text) + "\"";
  if (nu.value <= 0) return "rate \"" + std::string(text) + "\" must be greater than zero";
  return Rate{nu.value / seconds, std::string(text)};
}

std::string format_duration(Duration d) {
  auto ms = d.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

std::string format_size(std::uint64_t bytes) {
  if (bytes != 0 && bytes % (1024 * 1024) == 0)
    return std::to_string(bytes / (1024 * 1024)) + "MiB";
  if (bytes != 0 && bytes % 1024 == 0) return std::to_string(bytes / 1024) + "KiB";
  return std::to_string(bytes) + "B";
}

}  // namespace floodgate::config
