#pragma once
// Parsing of the config's unit-carrying scalars: durations, sizes and rates.
// Each returns the value or a message saying what was expected (errors as values).

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace floodgate::config {

using Duration = std::chrono::milliseconds;

template <typename T>
using Parsed = std::variant<T, std::string>;  // value, or why the text is not one

// "45ms", "10s", "1m", "1h", "1d". A unit is required: a bare number is ambiguous.
Parsed<Duration> parse_duration(std::string_view text);

// "16KiB", "10MiB", "1GiB", "512" (bytes), also "16KB"/"16K" as the binary unit like nginx.
Parsed<std::uint64_t> parse_size(std::string_view text);

// "10/s", "100/m", "0.5/h": events per second, fractional allowed, must be positive.
struct Rate {
  double per_second = 0;
  std::string text;
};
Parsed<Rate> parse_rate(std::string_view text);

std::string format_duration(Duration d);
std::string format_size(std::uint64_t bytes);

}  // namespace floodgate::config
