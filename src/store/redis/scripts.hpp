#pragma once
// The Lua library of lua/ (prelude, clock, acquire, adjust joined), embedded at build time, and
// SHA1 (what names the library and the EVALSHA scripts made from it: script_calls.hpp).

#include <string>
#include <string_view>

namespace floodgate::store::redis {

std::string_view library_body();

std::string sha1_hex(std::string_view text);

}  // namespace floodgate::store::redis
