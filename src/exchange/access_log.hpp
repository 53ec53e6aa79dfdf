#pragma once
// One JSON line per request: what an operator needs to explain a decision, and, when
// log.replay_fields asks for it, the inputs `floodgate replay` needs to decide the same
// request under another config. No raw client identifier beyond the socket peer unless the
// operator listed it (and then possibly hashed).

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exchange.hpp"
#include "floodgate/config/config.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/algorithm.hpp"

namespace floodgate::http {

// The line, without a newline: `took` is how long the exchange lasted, `hasher` hashes the
// replay fields marked hashed. A client or claims a replay field names are worked out here if
// nothing before needed them (client_of, claims_of), once either way.
std::string access_line(Exchange& x, std::chrono::steady_clock::duration took,
                        keys::KeyHasher& hasher);

// JSON string contents: quotes and backslashes escaped, control characters as \u00XX.
void append_json_escaped(std::string& out, std::string_view s);

}  // namespace floodgate::http
