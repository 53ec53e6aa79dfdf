#pragma once
// Bounds shared by the config loader and what changes a limit at run time (the admin API's
// overrides), so that a number the config would refuse cannot come in another way.

#include <cstdint>

namespace floodgate::config {

// The largest capacity or limit: 2^50 stays exact as a double (the buckets' arithmetic) with
// room to add a cost, where INT64_MAX would overflow into a negative X-RateLimit-Remaining.
inline constexpr std::int64_t kLargestLimit = std::int64_t(1) << 50;

}  // namespace floodgate::config
