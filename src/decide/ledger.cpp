#include "floodgate/decide/ledger.hpp"

#include <cctype>

namespace floodgate::decide {

void Ledger::settle(Admission& a, bool trailers, const FieldLookup& field,
                    std::vector<std::pair<std::string, std::string>>* noted) {
  for (const auto& s : a.settles) {
    if (s.count || s.from_trailer != trailers) continue;  // a count settles at the end
    auto value = field(s.header);
    if (!value) continue;
    if (noted) {
      std::string name = s.header;
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      noted->emplace_back(std::move(name), std::string(*value));
    }
    auto actual = limit::settled_cost(*value);
    if (!actual || *actual == s.charged) continue;  // changes nothing
    charged(a).adjust(s.item, *actual - s.charged);
    // A refund may make room the deny cache does not know about (it may hold "refused until
    // refill" from this very admission, which took the last unit).
    if (*actual < s.charged) deny_.forget(s.item.key);
  }
}

void Ledger::count_status(Admission& a, int status) {
  for (auto& s : a.settles) {
    if (!s.count || s.charged == 0) continue;
    const bool counted = s.count->contains(status);
    if (counted == s.holding) continue;
    charged(a).adjust(s.item, counted ? s.charged : -s.charged);
    s.holding = counted;
  }
}

void Ledger::finish(Admission& a, int status) {
  for (const auto& lease : a.leases) charged(a).release(lease);
  count_status(a, status);
}

}  // namespace floodgate::decide
