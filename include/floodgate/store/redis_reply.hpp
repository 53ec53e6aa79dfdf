#pragma once
// An owned hiredis reply: what the Redis connection hands to a caller that keeps a reply past
// its callback (the overrides' blocking client).

#include <memory>

struct redisReply;

namespace floodgate::store {

struct RedisReplyFree {
  void operator()(redisReply* r) const;
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyFree>;

}  // namespace floodgate::store
