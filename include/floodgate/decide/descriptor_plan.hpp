#pragma once
// A call of Envoy's rate limit service planned: its descriptors matched against their
// domain's rules (config/rls.hpp), `replaces` applied, and every limited descriptor's items
// put in one limit::Plan, each tagged with its descriptor. The proxy's RLS listener
// (rls/rls_call.cpp) and `floodgate replay` (replay/replayer.cpp) plan with this, so that a
// replay decides a logged call as the listener did. No protobuf, no I/O: a call is views
// into whoever decoded it (a RateLimitRequest, an access log line).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/config/config.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/policy.hpp"

namespace floodgate::decide {

// One call's descriptors, as views; cleared and refilled per call (storage kept).
struct DescriptorCall {
  struct Entry {
    std::string_view key, value;
  };
  struct Descriptor {
    std::uint32_t first = 0, count = 0;  // its entries: entries[first, first + count)
    std::int64_t hits = 1;               // what it costs
    // Its own `limit` (Envoy's descriptor override): requests per `own_seconds`; 0: none.
    std::uint32_t own_limit = 0;
    std::int64_t own_seconds = 0;
    bool has_own_limit() const { return own_seconds > 0; }
  };
  std::string_view domain;
  std::vector<Entry> entries;
  std::vector<Descriptor> descriptors;

  std::span<const Entry> entries_of(const Descriptor& d) const {
    return std::span(entries).subspan(d.first, d.count);
  }
  void clear() {
    domain = {};
    entries.clear();
    descriptors.clear();
  }
};

// The seconds of a descriptor override's unit as the API numbers them (second 1 .. year 6);
// 0 for any other number (an enum keeps numbers it does not name: a 0 s window divides by 0).
std::int64_t override_unit_seconds(int unit);

// What a descriptor of a planned call is.
enum class DescriptorKind { none, unlimited, limited };

// A planned call (storage reused across calls, as a replay plans millions).
struct DescriptorPlan {
  limit::Plan plan;                       // items tagged by descriptor index
  std::vector<keys::RequestFacts> facts;  // per descriptor: its key parts' values
  std::vector<DescriptorKind> kinds;      // per descriptor
  std::vector<std::string_view> values;   // facts[i].descriptor's storage
  std::vector<std::string> rates;         // an override's "N/SECONDS", a part of its key
  std::vector<int> rules;                 // per descriptor: its rule, -1 none
  config::Limit keyed_override;           // the override limit with a key for one descriptor
};

// Plans `call` under `domain` (its route `route` of `config`) into `out`, keys hashed by
// `hasher`. Every descriptor's kind is set; the items are the limited ones'.
void plan_descriptors(const config::Config& config, const config::RlsDomain& domain,
                      const config::Route& route, const DescriptorCall& call,
                      keys::KeyHasher& hasher, DescriptorPlan& out);

// A descriptor's key, value or domain as the access log holds it (replay field
// `descriptors`): every byte outside printable ASCII and each of `%&="\` and the space
// percent-encoded, so that it needs no JSON escaping and is valid UTF-8 whatever was sent.
void append_logged_text(std::string& out, std::string_view text);
// The reverse onto `storage` (reserved by the caller for `text.size()` more bytes: views into
// it must not move): the decoded view, or nullopt (`storage` unchanged) when `text` is not
// such a text.
std::optional<std::string_view> read_logged_text(std::string_view text, std::string& storage);
// A descriptor's entries as one logged text: `key=value` pairs joined by `&`, each part as
// append_logged_text writes it.
void append_entries_text(std::string& out, std::span<const DescriptorCall::Entry> entries);
// The reverse: a descriptor of `text`'s entries appended to `call`, decoded into `storage` (as
// read_logged_text). False, with `call` unchanged, when `text` is not such a text.
bool read_entries_text(std::string_view text, std::string& storage, DescriptorCall& call);

}  // namespace floodgate::decide
