#include "floodgate/decide/top_board.hpp"

#include <set>

namespace floodgate::decide {

namespace {

std::string key_text(const config::Limit& limit) {
  std::string out;
  for (const auto& part : limit.key) out += (out.empty() ? "" : " ") + part.text;
  return out;
}

}  // namespace

std::string TopBoard::identity(const config::Config& c, const config::Route& route,
                               const config::Limit& limit) {
  std::string id = route.name;
  id.append(1, '\0').append(limit.name).append(1, '\0').append(key_text(limit));
  id.append(1, '\0').append(std::to_string(c.admin.top.k));
  id.append(1, '\0').append(std::to_string(c.admin.top.window.count()));
  return id;
}

limit::TopWindow& TopBoard::window(const config::Config& c, const config::Route& route,
                                   const config::Limit& limit) {
  auto id = identity(c, route, limit);
  auto it = slots_.find(id);
  if (it == slots_.end()) {
    Slot slot;
    slot.names.route = route.name;
    slot.names.limit = limit.name;
    slot.names.key = key_text(limit);
    slot.names.k = c.admin.top.k;
    slot.names.window = c.admin.top.window.count() * 1000;
    slot.window = std::make_unique<limit::TopWindow>(counters(slot.names.k), slot.names.window);
    it = slots_.emplace(std::move(id), std::move(slot)).first;
  }
  return *it->second.window;
}

bool TopBoard::snapshot(const config::Config& current, limit::Micros now,
                        std::vector<limit::LimitTop>& out) {
  std::set<std::string, std::less<>> live;
  if (current.admin.keeps_top())
    for (const auto& route : current.routes)  // in config order: the order /top lists them
      for (const auto& limit : route.limits) {
        auto id = identity(current, route, limit);
        auto it = slots_.find(id);
        if (it == slots_.end()) continue;  // no request under this config yet
        auto copy = it->second.names;
        for (const auto* h : it->second.window->recent(now)) copy.slices.push_back(*h);
        out.push_back(std::move(copy));
        live.insert(std::move(id));
      }
  bool dropped = false;
  for (auto it = slots_.begin(); it != slots_.end();) {
    const auto& window = *it->second.window;
    if (!live.contains(it->first) && now - window.last_used() >= window.window()) {
      it = slots_.erase(it);
      dropped = true;
    } else {
      ++it;
    }
  }
  return dropped;
}

}  // namespace floodgate::decide
