// YAML text through the config loader: parse, validate, freeze. Whatever the bytes, the loader
// must return errors as values (never throw, crash or hang), and a config it accepts must
// summarize cleanly.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace floodgate;
  // Named as if it sat beside the examples, so that their relative public_keys paths resolve
  // and real key files are read (files are only ever read, never written).
  static const std::string file_name = FLOODGATE_SOURCE_DIR "/config/examples/fuzz.yaml";
  static const auto env = fuzz::no_env();
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  auto result = config::load_config_text(yaml, file_name, env);
  // What an operator would read: every diagnostic, or the --check-config summary.
  for (const auto& d : result.errors) d.to_string();
  for (const auto& d : result.warnings) d.to_string();
  if (result.config) config::summarize(*result.config);
  // An accepted config has no errors, and a rejected one says why.
  if ((result.config != nullptr) == !result.errors.empty()) __builtin_trap();
  return 0;
}
