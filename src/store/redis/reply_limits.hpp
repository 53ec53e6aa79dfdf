#pragma once
// A bound on what a Redis reply may make us allocate before its bytes arrive.
//
// hiredis 0.14 allocates an array's element table from the count the server announces
// ("*1000000000\r\n" is 13 bytes and asks for 8 GB). Our replies are small: a script's outcome
// has a few dozen elements and CLUSTER SLOTS at most one range per slot. A reader limited here
// refuses a larger announcement as an error instead, so a broken or hostile server costs a
// reconnect, not the process.

#include <cstddef>

struct redisReader;

namespace floodgate::store::redis {

// Above the largest reply we read: CLUSTER SLOTS with every one of the 16384 slots its own range.
inline constexpr int kMaxReplyElements = 16384;
// The bytes of a reply received and not yet parsed that a connection holds: hiredis buffers
// whatever a bulk string announces ("$1000000000\r\n"), and rescans a line without its CRLF
// from its start on every read (quadratic). An array is parsed element by element, so only one
// element (and one read) waits at a time; ours are a few hundred bytes at most.
inline constexpr std::size_t kMaxUnparsedBytes = std::size_t{1} << 20;

// Makes `reader` refuse arrays announcing more than kMaxReplyElements elements (the reader then
// reports an error, as for any protocol fault). Everything else is hiredis's own handling.
void limit_reply_sizes(redisReader* reader);

}  // namespace floodgate::store::redis
