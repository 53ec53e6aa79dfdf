#pragma once

#include <string_view>
#include <vector>

namespace floodgate::app {

// `floodgate replay ...` (args[0] is "replay"); returns the exit status.
int replay_command(const std::vector<std::string_view>& args);

}  // namespace floodgate::app
