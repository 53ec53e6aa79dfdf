#pragma once
// Timestamps as the access log writes them and the replay reads them back.

#include <string>
#include <string_view>

#include "floodgate/limit/algorithm.hpp"

namespace floodgate::limit {

// "2026-11-30T05:10:50.286123Z"
std::string format_utc(Micros t);

// RFC 3339: "2026-11-30T05:10:50.286123Z" (fraction optional, up to 9 digits, microseconds
// kept; Z or +hh:mm / -hh:mm) -> Unix microseconds. False if it is not one.
bool parse_utc(std::string_view text, Micros& out);

// The `n` decimal digits at `pos` of `s` as a number; false if any is not a digit or missing.
bool fixed_digits(std::string_view s, std::size_t pos, std::size_t n, int& out);

// Unix microseconds of a civil UTC date and time (no range checks).
Micros micros_of(int year, int month, int day, int hour, int minute, int second);

}  // namespace floodgate::limit
