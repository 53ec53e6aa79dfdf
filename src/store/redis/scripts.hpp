#pragma once
// The Lua scripts of lua/, embedded at build time, and their SHA1 (what EVALSHA names).

#include <string>
#include <string_view>

namespace floodgate::store::redis {

std::string_view acquire_script();
std::string_view adjust_script();

std::string sha1_hex(std::string_view text);

}  // namespace floodgate::store::redis
