#pragma once
// The value one request becomes. The front protocol (HTTP/1.1, HTTP/2) fills in what it read;
// the pipeline (pipeline.hpp) derives the rest once: the target in the form it is routed,
// keyed, logged and forwarded in, the route, the client, the verified claims, then the
// limits' decision, the status and the timings. Everything after the head reads it, the
// access log included; nothing recomputes it.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fields.hpp"
#include "floodgate/config/config.hpp"
#include "floodgate/decide/admission.hpp"
#include "floodgate/decide/reply.hpp"
#include "floodgate/keys/jwks.hpp"
#include "floodgate/limit/policy.hpp"
#include "floodgate/tls/fingerprint.hpp"
#include "floodgate/uri/target.hpp"
#include "forwarding.hpp"
#include "request_sources.hpp"

namespace floodgate::http {

// The gate's decision and what the request owes the store (decide/admission.hpp); the
// answers floodgate gives itself (decide/reply.hpp).
using decide::Admission;
using decide::refused;
using decide::Reply;

struct Exchange {
  Exchange() = default;
  // Its views may point into its own strings and arrays: it stays where it was built.
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // Filled in by the front protocol when the request's head has been read.
  config::ConfigPtr config;        // the snapshot the request is served under, to its end
  const Fields* fields = nullptr;  // the request's header fields, as received
  std::string_view method;
  std::string_view raw_target;  // as received: the request-target
  std::string_view host_field;  // Host as received (empty when absent)
  std::string_view peer_ip;     // the socket peer, as text
  config::IpAddress peer;
  bool tls = false;
  // The connection's ClientHello fingerprints (TLS listeners, when a limit keys on them).
  const tls::Fingerprints* tls_fingerprints = nullptr;
  keys::JwksCell* jwks = nullptr;       // the issuer's keys (jwt.jwks), when the app fetches them
  std::string_view protocol = "http1";  // the front protocol: http1, h2, h3
  std::string_view alt_svc;   // a TCP listener's Alt-Svc when it lists h3: on every answer
  unsigned version = 11;      // the client's HTTP version: 10, 11
  bool can_continue = true;   // may the connection carry another request after an answer of ours
  limit::Micros arrived = 0;  // the limit clock when the head had been read
  std::chrono::steady_clock::time_point started{};  // set only when the access log is on

  // Derived once by route_exchange().
  bool target_parsed = false;
  uri::Target target;     // normalized path, query; origin_form is what the upstream receives
  std::string_view host;  // the authority of an absolute-form target, else Host; with port
  const config::Route* route = nullptr;
  std::optional<LazyClaims> claims;         // verified on the first claim asked for
  std::optional<config::IpAddress> client;  // behind trusted proxies: client_of()

  // The limits' decision (decide::Gate).
  Admission admission;

  // How it ended, for the access log and the metrics.
  int status = 0;
  std::chrono::steady_clock::duration upstream_took{};
  std::uint64_t bytes_in = 0;   // request body bytes received from the client
  std::uint64_t bytes_out = 0;  // response body bytes sent to the client (ours or the origin's)
  // Settle headers of the response (lower-case name, value), for replaying settlement.
  std::vector<std::pair<std::string, std::string>> settled;
  // A service's own replay fields (log.replay_fields: descriptors) as JSON members
  // ("name":"value",... already escaped): the RLS listener's call (rls_service.cpp).
  std::string service_fields;

  // Owns the text of an absolute-form target and of a rewritten (normalized) path, so that the
  // views above outlive the rewrite of the request's own head for the upstream.
  std::string target_copy;
  std::string normalized;

  // Set by identify() (request_id.hpp) before anything can answer the request; written in
  // place (no allocation per request).
  std::string_view request_id;   // X-Request-Id: kept from a trusted peer, or generated
  std::string_view traceparent;  // set when a trace starts here (empty: the client's is passed on)
  bool drop_tracestate = false;  // the client's traceparent was malformed: its tracestate goes too
  char id_text[32];              // a generated request id
  char trace_text[55];           // a traceparent started here
};

}  // namespace floodgate::http
