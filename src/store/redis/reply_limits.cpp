#include "store/redis/reply_limits.hpp"

#include <hiredis/hiredis.h>

namespace floodgate::store::redis {

namespace {

// hiredis keeps its default reply builders private; a reader it creates points at them.
redisReplyObjectFunctions hiredis_defaults() {
  redisReplyObjectFunctions defaults{};
  if (redisReader* probe = redisReaderCreate()) {
    defaults = *probe->fn;
    redisReaderFree(probe);
  }
  return defaults;
}

const redisReplyObjectFunctions& defaults() {
  static const redisReplyObjectFunctions table = hiredis_defaults();
  return table;
}

// hiredis reads a null result from a builder as an allocation failure and stops the reader.
void* create_bounded_array(const redisReadTask* task, int elements) {
  if (elements > kMaxReplyElements) return nullptr;
  return defaults().createArray(task, elements);
}

redisReplyObjectFunctions bounded() {
  redisReplyObjectFunctions table = defaults();
  table.createArray = &create_bounded_array;
  return table;
}

}  // namespace

void limit_reply_sizes(redisReader* reader) {
  // Shared by every reader and never written: hiredis only calls through it.
  static redisReplyObjectFunctions table = bounded();
  if (reader && defaults().createArray) reader->fn = &table;
}

}  // namespace floodgate::store::redis
