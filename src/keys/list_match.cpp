#include "floodgate/keys/list_match.hpp"

namespace floodgate::keys {

bool on_list(const config::AccessList& list, const RequestFacts& request) {
  if (!list.cidrs.empty() && list.cidrs.contains(request.client)) return true;
  for (const auto& v : list.values)
    if (auto value = part_value(v.part, request); value && v.values.count(*value)) return true;
  return false;
}

Listed listed(const config::Lists& global, const config::Lists& route,
              const RequestFacts& request) {
  if (on_list(global.deny, request) || on_list(route.deny, request)) return Listed::denied;
  if (on_list(global.allow, request) || on_list(route.allow, request)) return Listed::allowed;
  return Listed::none;
}

}  // namespace floodgate::keys
