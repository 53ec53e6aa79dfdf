#pragma once
// Budgets for the tests' timing assertions. A bound is what the claim allows plus the slack a
// loaded machine needs; the sanitizer builds (scripts/sanitize.sh) run every step several
// times slower on CI's 2 cores, so there the slack is stretched, never the claim dropped.

#include <chrono>

namespace floodgate::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr int kSlowdown = 4;
#else
inline constexpr int kSlowdown = 1;
#endif

// `normal` of slack on a plain build, stretched under a sanitizer.
constexpr std::chrono::milliseconds slack(std::chrono::milliseconds normal) {
  return normal * kSlowdown;
}

}  // namespace floodgate::testing
