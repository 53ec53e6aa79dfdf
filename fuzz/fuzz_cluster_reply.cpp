// What a Redis Cluster node tells the cluster store about the cluster: CLUSTER SLOTS replies
// and MOVED/ASK redirects, through hiredis's (bounded) reader, then the slot map the store
// builds from them, and the node names they carry (node_address.hpp). Issue 15 found these
// names parsed with std::stoi inside hiredis's callback: one bad port aborted the process.
// The first input byte chooses: even, RESP bytes; odd, the rest is one node name as text.

#include <hiredis/hiredis.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "store/redis/node_address.hpp"
#include "store/redis/reply_limits.hpp"
#include "store/redis/script_calls.hpp"

namespace {

namespace redis = floodgate::store::redis;

// A node name the store keeps must be a host and a port it can connect to, and must spell
// itself one way: parsing its name gives the same node back.
void check_node(const redis::NodeAddress& n) {
  if (n.host.empty() || n.port == 0) __builtin_trap();
  auto again = redis::parse_node_address(n.name());
  if (!again || again->host != n.host || again->port != n.port) __builtin_trap();
}

// As ClusterStore::apply_slots: every range indexes a 16384-entry table.
void apply(const redisReply* r) {
  std::array<const redis::NodeAddress*, redis::kClusterSlots> owners{};
  auto ranges = redis::slot_ranges_of(r);
  for (const auto& range : ranges) {
    check_node(range.node);
    if (range.from < 0 || range.to >= redis::kClusterSlots || range.from > range.to)
      __builtin_trap();
    for (int s = range.from; s <= range.to; ++s) owners[static_cast<std::size_t>(s)] = &range.node;
  }
  if (auto redirect = redis::redirect_of(r)) {
    if (redirect->slot < 0 || redirect->slot >= redis::kClusterSlots) __builtin_trap();
    check_node(redirect->node);
  }
}

void replies(std::string_view in) {
  redisReader* reader = redisReaderCreate();
  if (!reader) return;
  redis::limit_reply_sizes(reader);
  redisReaderFeed(reader, in.data(), in.size());
  void* reply = nullptr;
  while (redisReaderGetReply(reader, &reply) == REDIS_OK && reply) {
    apply(static_cast<const redisReply*>(reply));
    freeReplyObject(reply);
    reply = nullptr;
  }
  redisReaderFree(reader);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    replies(in);
  } else if (auto n = redis::parse_node_address(in)) {
    check_node(*n);
  }
  return 0;
}
