#pragma once
// What the fuzz targets share: a configuration built once from YAML text by the real loader,
// and one fixed "now", so that every run of an input takes the same path.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "floodgate/config/loader.hpp"

namespace floodgate::fuzz {

// 2023-11-14T22:13:20Z: the seeds' tokens are valid at this time.
inline constexpr std::int64_t kNowSeconds = 1'700'000'000;

inline config::EnvLookup no_env() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

// A target whose own fixture does not load would fuzz nothing useful: stop at once, loudly.
inline config::ConfigPtr load_fixture(const std::string& yaml, const std::string& file_name) {
  auto r = config::load_config_text(yaml, file_name, no_env());
  if (!r.config) {
    for (const auto& e : r.errors) std::fprintf(stderr, "fixture: %s\n", e.to_string().c_str());
    std::abort();
  }
  return r.config;
}

}  // namespace floodgate::fuzz
