#pragma once
// Whether a request's caller is on an allow or deny list (config::Lists): by the resolved
// client address (one binary search over the CIDRs) and by exact values of key parts (one
// hash lookup per part listed).

#include "floodgate/config/config.hpp"
#include "floodgate/keys/key_builder.hpp"

namespace floodgate::keys {

enum class Listed { none, denied, allowed };

bool on_list(const config::AccessList& list, const RequestFacts& request);

// The global lists and the route's together: denied when either deny list names the caller
// (a deny wins over an allow, as in Envoy's RBAC), else allowed when either allow list does.
Listed listed(const config::Lists& global, const config::Lists& route, const RequestFacts& request);

}  // namespace floodgate::keys
