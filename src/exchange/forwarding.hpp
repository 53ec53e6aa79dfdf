#pragma once
// Header hygiene between client and upstream: what a proxy must drop, add and normalise.
// Pure functions over a message's Fields, so they are unit-tested without sockets.

#include <optional>
#include <string>
#include <string_view>

#include "fields.hpp"
#include "floodgate/config/config.hpp"

namespace floodgate::http {

// Drops the hop-by-hop headers of RFC 9110 section 7.6.1 (Connection, Keep-Alive,
// Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade, Proxy-Authenticate,
// Proxy-Authorization), every header named in Connection, and Content-Length: the caller
// re-establishes framing itself, so that exactly one framing header ever leaves. Connection
// cannot name Host, the framing fields or the forwarding ones (X-Forwarded-For,
// X-Forwarded-Proto, Via, Forwarded, X-Real-IP): those names in it are ignored.
void strip_hop_by_hop(Fields& fields);

// Content-Length as a number; nullopt when absent or not a number.
std::optional<std::uint64_t> content_length_of(const Fields& fields);

// TE: trailers, the one TE a proxy passes on (to an h2 upstream: gRPC needs it).
bool asks_for_trailers(const Fields& fields);

// Every value of a possibly repeated list header, joined as one list (RFC 9110 section 5.3).
std::string joined_values(const Fields& fields, std::string_view name,
                          std::string_view separator = ", ");

// Request framing a proxy must refuse before anything is forwarded (RFC 9112 sections 3.2
// and 6): a Transfer-Encoding that is not exactly chunked (`chunked`: the parser's verdict),
// any Transfer-Encoding in HTTP/1.0, a missing (HTTP/1.1) or repeated Host, and a Host that
// is not a valid authority.
bool framing_is_safe(const RequestHead& req, bool chunked);
// host [":" port], host a reg-name, an IPv4 address or an IP literal in brackets.
bool valid_host(std::string_view host);

// What a stream's head (HTTP/2, HTTP/3) cannot be forwarded with, checked before it is routed:
// 431 past the header bound, 400 for CONNECT (floodgate forwards requests, not tunnels: also an
// extended CONNECT's :protocol) and for a host HTTP/1.1 would refuse too, or a `host` field
// that names another authority than :authority (RFC 9113 8.3.1, RFC 9114 4.3.1); 0: none.
int refused_stream_head(std::string_view method, bool extended_connect, std::string_view authority,
                        const Fields& fields, std::size_t header_bytes,
                        std::size_t max_header_bytes);

// A WebSocket opening handshake (RFC 6455 section 4.1): GET, HTTP/1.1, `Upgrade: websocket`
// and `upgrade` among the Connection tokens. Other upgrades (h2c, ...) are not tunnelled.
bool is_websocket_upgrade(const RequestHead& req);

struct ForwardedFor {
  std::string_view peer_ip;  // the socket peer, as text
  bool tls = false;          // the client spoke HTTPS to us
  std::string_view pop;      // goes into Via
};

// X-Forwarded-For gains the peer (after any it already had), X-Forwarded-Proto is set, and
// Via gains "1.1 <pop>".
void add_forwarding_headers(Fields& fields, const ForwardedFor& info);

}  // namespace floodgate::http
