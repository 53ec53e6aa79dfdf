// log.replay_fields / log.replay_hashed: which request inputs the access log records so that
// `floodgate replay` can key a candidate config's limits. Resolved after the routes are read,
// because `auto` means "whatever these limits use".
#include <algorithm>

#include "sections.hpp"

namespace floodgate::config {

std::string ReplayField::text() const {
  switch (kind) {
    case Kind::ip:
      return "ip";
    case Kind::host:
      return "host";
    case Kind::header:
      return "header:" + name;
    case Kind::query:
      return "query:" + name;
    case Kind::jwt:
      return "jwt:" + name;
    case Kind::cookie:
      return "cookie:" + name;
    case Kind::tls:
      return "tls:" + name;
    case Kind::descriptors:
      return "descriptors";
  }
  return "?";
}

namespace {

std::optional<ReplayField> replay_field_of(const KeyPart& k) {
  switch (k.kind) {
    case KeyPart::Kind::ip:
      return ReplayField{ReplayField::Kind::ip, "", false};
    case KeyPart::Kind::host:
      return ReplayField{ReplayField::Kind::host, "", false};
    case KeyPart::Kind::header:
      return ReplayField{ReplayField::Kind::header, k.name, false};
    case KeyPart::Kind::query:
      return ReplayField{ReplayField::Kind::query, k.name, false};
    case KeyPart::Kind::jwt:
      return ReplayField{ReplayField::Kind::jwt, k.name, false};
    case KeyPart::Kind::cookie:
      return ReplayField{ReplayField::Kind::cookie, k.name, false};
    case KeyPart::Kind::tls:
      return ReplayField{ReplayField::Kind::tls, k.name, false};
    default:  // route, method, path: in every access log line already
      return std::nullopt;
  }
}

class FieldSet {
 public:
  void add(const ReplayField& f) {
    if (!find(f)) fields_.push_back(f);
  }
  ReplayField* find(const ReplayField& f) {
    auto it = std::find_if(fields_.begin(), fields_.end(), [&](const ReplayField& x) {
      return x.kind == f.kind && x.name == f.name;
    });
    return it == fields_.end() ? nullptr : &*it;
  }
  std::vector<ReplayField> take() { return std::move(fields_); }

 private:
  std::vector<ReplayField> fields_;
};

// ip, host, every input a limit keys on or picks its tier by, and the cost headers.
void add_what_limits_use(const Config& c, FieldSet& out) {
  out.add({ReplayField::Kind::ip, "", false});
  out.add({ReplayField::Kind::host, "", false});
  for (const auto& f : limit_inputs(c)) out.add(f);
  for (const auto& route : c.routes)
    for (const auto& l : route.limits)
      if (!l.cost.from_header.empty()) {
        std::string name = l.cost.from_header;
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        out.add({ReplayField::Kind::header, name, false});
      }
}

}  // namespace

std::vector<ReplayField> limit_inputs(const Config& c) {
  FieldSet out;
  // The lists' inputs too: a replay decides them as the proxy does.
  auto add_lists = [&](const Lists& lists) {
    for (const auto* list : {&lists.deny, &lists.allow}) {
      if (!list->cidrs.empty()) out.add({ReplayField::Kind::ip, "", false});
      for (const auto& v : list->values)
        if (auto f = replay_field_of(v.part)) out.add(*f);
    }
  };
  add_lists(c.lists);
  for (const auto& route : c.routes) add_lists(route.lists);
  for (const auto& route : c.routes)
    for (const auto& l : route.limits) {
      for (const auto& k : l.key)
        if (auto f = replay_field_of(k)) out.add(*f);
      if (l.overrides)
        if (auto f = replay_field_of(l.overrides->by)) out.add(*f);
    }
  if (!c.rls.domains.empty()) out.add({ReplayField::Kind::descriptors, "", false});
  return out.take();
}

void resolve_replay_fields(YamlReader& r, const YAML::Node& root, Config& c) {
  const YAML::Node log = root["log"];
  if (!given(log) || !log.IsMap()) return;
  const YAML::Node fields = log["replay_fields"];
  const YAML::Node hashed = log["replay_hashed"];
  FieldSet out;
  if (given(fields)) {
    if (fields.IsScalar() && fields.Scalar() == "auto") {
      add_what_limits_use(c, out);
    } else {
      for (const auto& e : r.sequence(fields, "log.replay_fields")) {
        if (e.IsScalar() && e.Scalar() == "descriptors") {
          out.add({ReplayField::Kind::descriptors, "", false});
          continue;
        }
        auto k = read_key_part(r, e, "log.replay_fields");
        if (!k) continue;
        if (auto f = replay_field_of(*k))
          out.add(*f);
        else
          r.error(e, "log.replay_fields",
                  "\"" + k->text + "\" is in every access log line already (route, method, path)");
      }
    }
  }
  if (given(hashed)) {
    for (const auto& e : r.sequence(hashed, "log.replay_hashed")) {
      if (e.IsScalar() && e.Scalar() == "descriptors") {
        r.error(e, "log.replay_hashed",
                "descriptors are recorded as sent: a rule's prefix pattern must read the value");
        continue;
      }
      auto k = read_key_part(r, e, "log.replay_hashed");
      if (!k) continue;
      auto f = replay_field_of(*k);
      auto* recorded = f ? out.find(*f) : nullptr;
      if (!recorded)
        r.error(e, "log.replay_hashed", "\"" + k->text + "\" is not one of log.replay_fields");
      else
        recorded->hashed = true;
    }
  }
  c.log.replay_fields = out.take();
  if (!c.log.replay_fields.empty() && !c.log.access_log)
    r.warn(fields, "log.replay_fields", "records nothing without log.access_log: true");
}

}  // namespace floodgate::config
