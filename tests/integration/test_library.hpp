#pragma once
// The tests' Redis function library: the shipped one (lua/) with tests/lua/clock_injected.lua
// in place of lua/clock.lua, so that a time sent with a call is the time it decides at.
// Generated at build time (tests/CMakeLists.txt) into the test executables only: the binary
// cannot load it. A store is handed it with store::RedisStoreOptions::TestTime.

#include <string_view>

namespace floodgate::testing {

std::string_view test_library_body();

}  // namespace floodgate::testing
