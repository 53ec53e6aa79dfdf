// Bytes from a Redis server through hiredis's reply reader (bounded as the connections bound it)
// and then floodgate's decoding of each reply: the acquire script's outcome for 1 to 3 items,
// a batch of requests, NOSCRIPT and the other resends, and MOVED/ASK redirects. Checks what the
// stores rely on when they use a decoded reply.

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "store/redis/reply_limits.hpp"
#include "store/redis/script_calls.hpp"

namespace {

namespace redis = floodgate::store::redis;

// Redis Cluster's slot count: cluster_store indexes its slot table with a redirect's slot.
constexpr int kSlots = redis::kClusterSlots;

void check(const redisReply* r) {
  // Requests of 1 to 3 items, and a batch of them, one item with a holder (a lease).
  using floodgate::store::Item;
  static const std::vector<std::vector<Item>> shapes = [] {
    std::vector<std::vector<Item>> out(3);
    for (std::size_t n = 1; n <= 3; ++n) out[n - 1].resize(n);
    out[1][1].leased.holder = "h";
    return out;
  }();
  for (const auto& items : shapes)
    if (auto o = redis::decode_outcome(r, items); o && o->decisions.size() != items.size())
      __builtin_trap();
  const std::vector<const std::vector<Item>*> batch{&shapes[0], &shapes[1], &shapes[0]};
  std::string error;
  if (auto all = redis::decode_outcomes(r, batch, &error)) {
    if (all->size() != batch.size()) __builtin_trap();
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (const auto* o = std::get_if<floodgate::store::Outcome>(&(*all)[i]);
          o && o->decisions.size() != batch[i]->size())
        __builtin_trap();
  }
  for (auto via : {redis::Via::fcall, redis::Via::load_then_fcall, redis::Via::evalsha})
    redis::resend_via(r, via);
  if (auto redirect = redis::redirect_of(r))
    if (redirect->slot < 0 || redirect->slot >= kSlots) __builtin_trap();
  // The cluster store fills a slot table from these: every range must fit it.
  for (const auto& range : redis::slot_ranges_of(r))
    if (range.from < 0 || range.to >= kSlots || range.from > range.to) __builtin_trap();
  redis::is_noscript(r);
}

// Decodes every complete reply buffered so far; false once the stream is broken.
bool drain(redisReader* reader) {
  void* reply = nullptr;
  while (redisReaderGetReply(reader, &reply) == REDIS_OK && reply) {
    check(static_cast<const redisReply*>(reply));
    freeReplyObject(reply);
    reply = nullptr;
  }
  return reader->err == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  redisReader* reader = redisReaderCreate();
  if (!reader) return 0;
  // As the connections do: an array announcing more elements than any reply of ours is refused
  // before hiredis allocates its table.
  redis::limit_reply_sizes(reader);
  // In two pieces, as replies arrive from a socket: a reply may be split across reads. The
  // input's length says where to split, so the bytes themselves stay free.
  std::size_t split = size / 2 + size % 7;
  if (split > size) split = size;
  redisReaderFeed(reader, in.data(), split);
  if (drain(reader)) {
    redisReaderFeed(reader, in.data() + split, size - split);
    drain(reader);
  }
  redisReaderFree(reader);
  return 0;
}
