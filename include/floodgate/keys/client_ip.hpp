#pragma once
// Who is calling, by address. Pure: the socket peer and the forwarding header in, one
// address out.

#include <string_view>

#include "floodgate/config/config.hpp"

namespace floodgate::keys {

// The client address: the socket peer, unless the peer is a trusted proxy; then the
// forwarding header (comma-separated, possibly from several header lines joined) is walked
// from the right, skipping trusted proxies; the first other address is the client. If every
// entry is trusted, the left-most one is. An unparsable entry ends the walk at the last good
// address (a client cannot smuggle a fake address past a garbled one). IPv4-mapped IPv6 is
// normalised to IPv4. The address is whole: allow and deny lists match it as it is, and only
// an `ip` key part folds IPv6 to `ipv6_prefix` (RequestFacts::ipv6_prefix), so that a /64 is
// one caller to a limit while a list can still name one address.
config::IpAddress client_ip(const config::IpAddress& peer, std::string_view forwarded_header,
                            const config::ClientIpSettings& settings);

// Clears the bits past `prefix` of an IPv6 address; IPv4 is returned unchanged.
config::IpAddress fold_ipv6(const config::IpAddress& ip, int prefix);

}  // namespace floodgate::keys
