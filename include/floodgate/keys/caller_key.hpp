#pragma once
// From a caller as people read it (/top's text: `ip=203.0.113.7 jwt:tenant=acme`) back to the
// store key its requests use, for the admin API: look a caller up, reset it, give it an
// override. The inverse of append_caller_text (key_builder.hpp) for one route's limit.

#include <optional>
#include <string>
#include <string_view>

#include "floodgate/config/config.hpp"
#include "floodgate/keys/key_builder.hpp"

namespace floodgate::keys {

struct CallerKey {
  std::string key;    // the store key, as build_key makes it for such a request
  std::string error;  // why there is none: a part missing from the text, a bad address
};

// `caller` names the limit's key parts in its order, `PART=VALUE` separated by single spaces
// (a value may hold spaces; bytes /top escaped as \xHH are read back, the backslash among them:
// /top shows a value's `\` as `\x5c`). A `method` part, which /top leaves out, is given as
// `method=GET`; `route` never is. "(everyone)" stands for a key
// of route and method parts only, "(missing: shared)" as a value for the shared bucket.
CallerKey caller_key(std::string_view prefix, const config::Route& route,
                     const config::Limit& limit, std::string_view caller, KeyHasher& hasher);

}  // namespace floodgate::keys
