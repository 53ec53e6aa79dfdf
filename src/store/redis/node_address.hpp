#pragma once
// A Redis Cluster node's address as the cluster names it: "host:port", "[v6]:port", or the
// unbracketed "v6:port" Redis itself writes in MOVED/ASK. These arrive in replies (input, not
// configuration), so parsing is total: an error value for anything that is not a host and a
// port in 1..65535, never an exception (it runs inside a reply's callback).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate::store::redis {

struct NodeAddress {
  std::string host;  // without brackets: what the resolver and hiredis take
  std::uint16_t port = 0;
  // One spelling per node ("[::1]:7000", "10.0.0.1:7000"): the key of the store's node table.
  std::string name() const;
};

std::optional<NodeAddress> parse_node_address(std::string_view text);
// A CLUSTER SLOTS entry gives host and port apart; the same checks.
std::optional<NodeAddress> make_node_address(std::string_view host, long long port);

}  // namespace floodgate::store::redis
