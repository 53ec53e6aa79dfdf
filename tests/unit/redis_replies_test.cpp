// Decoding what Redis sends: replies are input like any other. Built with hiredis's own
// reader from RESP bytes, as the connection does.

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <memory>
#include <string>

#include "store/redis/node_address.hpp"
#include "store/redis/redis_connection.hpp"
#include "store/redis/reply_limits.hpp"
#include "store/redis/script_calls.hpp"

namespace redis = floodgate::store::redis;

namespace {

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

using Reader = std::unique_ptr<redisReader, void (*)(redisReader*)>;

// Bounded as the connections bound theirs.
Reader limited_reader() {
  Reader reader(redisReaderCreate(), redisReaderFree);
  redis::limit_reply_sizes(reader.get());
  return reader;
}

Reply parse(const std::string& resp) {
  auto reader = limited_reader();
  redisReaderFeed(reader.get(), resp.data(), resp.size());
  void* out = nullptr;
  EXPECT_EQ(redisReaderGetReply(reader.get(), &out), REDIS_OK);
  return Reply(static_cast<redisReply*>(out));
}

std::string master(int from, int to, const std::string& host, int port) {
  return "*3\r\n:" + std::to_string(from) + "\r\n:" + std::to_string(to) + "\r\n*2\r\n$" +
         std::to_string(host.size()) + "\r\n" + host + "\r\n:" + std::to_string(port) + "\r\n";
}

TEST(RedisReplies, ClusterSlotsGiveEachRangeItsMaster) {
  auto r =
      parse("*2\r\n" + master(0, 8191, "10.0.0.1", 7000) + master(8192, 16383, "10.0.0.2", 7001));
  auto ranges = redis::slot_ranges_of(r.get());
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].from, 0);
  EXPECT_EQ(ranges[0].to, 8191);
  EXPECT_EQ(ranges[0].node.name(), "10.0.0.1:7000");
  EXPECT_EQ(ranges[1].from, 8192);
  EXPECT_EQ(ranges[1].to, 16383);
  EXPECT_EQ(ranges[1].node.name(), "10.0.0.2:7001");
}

// Found by fuzz_redis_reply (out of memory in CI): "*1000000000" made hiredis allocate an 8 GB
// element table before a single element arrived. Here after a bulk string whose two closing
// bytes hiredis skips unread, which is how the input passed the harness's old lexical filter.
TEST(RedisReplies, AnArrayLargerThanAnyReplyOfOursStopsTheReader) {
  for (const std::string resp :
       {"*1000000000\r\n", "$1\r\nxAB*1000000000\r\n:1\r\n", "*1\r\n*16385\r\n"}) {
    auto reader = limited_reader();
    redisReaderFeed(reader.get(), resp.data(), resp.size());
    void* out = nullptr;
    int status = REDIS_OK;
    while ((status = redisReaderGetReply(reader.get(), &out)) == REDIS_OK && out) {
      freeReplyObject(out);
      out = nullptr;
    }
    EXPECT_EQ(status, REDIS_ERR) << resp;
    EXPECT_NE(reader->err, 0) << resp;
  }
  // The bound itself is accepted: CLUSTER SLOTS may list every slot as its own range.
  auto reader = limited_reader();
  std::string resp = "*" + std::to_string(redis::kMaxReplyElements) + "\r\n";
  for (int i = 0; i < redis::kMaxReplyElements; ++i) resp += ":1\r\n";
  redisReaderFeed(reader.get(), resp.data(), resp.size());
  void* out = nullptr;
  ASSERT_EQ(redisReaderGetReply(reader.get(), &out), REDIS_OK);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(static_cast<redisReply*>(out)->elements,
            static_cast<std::size_t>(redis::kMaxReplyElements));
  freeReplyObject(out);
}

// Found by fuzz_redis_reply: the cluster store indexed its slot table with these numbers.
TEST(RedisReplies, SlotNumbersOutsideTheTableAreIgnored) {
  auto r = parse("*4\r\n" + master(-5, 10, "a", 1) + master(16000, 20000, "b", 2) +
                 master(30, 20, "c", 3) + master(100, 200, "d", 4));
  auto ranges = redis::slot_ranges_of(r.get());
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].node.name(), "d:4");
  EXPECT_FALSE(redis::redirect_of(parse("-MOVED 70009 127.0.0.1:7000\r\n").get()));
  EXPECT_FALSE(redis::redirect_of(parse("-ASK -1 127.0.0.1:7000\r\n").get()));
  auto ok = redis::redirect_of(parse("-ASK 16383 127.0.0.1:7000\r\n").get());
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->ask);
  EXPECT_EQ(ok->slot, 16383);
  EXPECT_EQ(ok->node.name(), "127.0.0.1:7000");
}

TEST(RedisReplies, MalformedSlotEntriesAreSkipped) {
  // A string where a number belongs, a master without a port, a non-array entry.
  auto r = parse(
      "*3\r\n*3\r\n$1\r\n0\r\n:10\r\n*2\r\n$1\r\na\r\n:1\r\n"
      "*3\r\n:0\r\n:10\r\n*1\r\n$1\r\na\r\n"
      ":7\r\n");
  EXPECT_TRUE(redis::slot_ranges_of(r.get()).empty());
  EXPECT_TRUE(redis::slot_ranges_of(nullptr).empty());
}

// Issue 15, defects 1 and 2: the cluster store took "host:port" apart with std::stoi inside
// hiredis's read callback, so one bad port threw through C frames (SIGABRT), a port above
// 65535 was truncated to 16 bits, and "[::1]:7000" kept its brackets as the host name.
TEST(RedisNodeAddress, HostsAndPortsAreParsedOnceAndChecked) {
  struct Case {
    const char* text;
    const char* host;  // nullptr: refused
    int port;
  };
  for (const auto& c : std::initializer_list<Case>{
           {"127.0.0.1:7000", "127.0.0.1", 7000},
           {"redis-0.internal:6379", "redis-0.internal", 6379},
           {"[::1]:7000", "::1", 7000},
           {"::1:7000", "::1", 7000},  // as Redis writes IPv6 in MOVED
           {"[fe80::1%eth0]:7001", "fe80::1%eth0", 7001},
           {"127.0.0.1:65535", "127.0.0.1", 65535},
           {"127.0.0.1:abc", nullptr, 0},
           {"127.0.0.1:99999999999", nullptr, 0},
           {"127.0.0.1:65536", nullptr, 0},
           {"127.0.0.1:0", nullptr, 0},
           {"127.0.0.1:-1", nullptr, 0},
           {"127.0.0.1:+7000", nullptr, 0},
           {"127.0.0.1:70 00", nullptr, 0},
           {"127.0.0.1:", nullptr, 0},
           {":7000", nullptr, 0},
           {"127.0.0.1", nullptr, 0},
           {"[::1]7000", nullptr, 0},
           {"[::1:7000", nullptr, 0},
           {"", nullptr, 0},
           {"a b:7000", nullptr, 0},
           {"a\r\n:7000", nullptr, 0},
       }) {
    auto a = redis::parse_node_address(c.text);
    if (!c.host) {
      EXPECT_FALSE(a) << c.text;
      continue;
    }
    ASSERT_TRUE(a) << c.text;
    EXPECT_EQ(a->host, c.host) << c.text;
    EXPECT_EQ(a->port, c.port) << c.text;
  }
  // One spelling per node, whichever way a reply wrote it.
  EXPECT_EQ(redis::parse_node_address("::1:7000")->name(), "[::1]:7000");
  EXPECT_EQ(redis::parse_node_address("[::1]:7000")->name(), "[::1]:7000");
}

TEST(RedisReplies, RedirectsAndSlotEntriesNamingBadNodesAreRefused) {
  for (const char* e : {"-MOVED 3999 127.0.0.1:abc\r\n", "-MOVED 3999 127.0.0.1:99999999999\r\n",
                        "-ASK 3999 127.0.0.1:0\r\n", "-MOVED 3999\r\n", "-MOVED 39x9 a:1\r\n",
                        "-MOVED 3999 127.0.0.1:7000 extra\r\n"})
    EXPECT_FALSE(redis::redirect_of(parse(e).get())) << e;
  auto v6 = redis::redirect_of(parse("-MOVED 3999 ::1:7002\r\n").get());
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->node.host, "::1");
  EXPECT_EQ(v6->node.port, 7002);
  auto r = parse("*4\r\n" + master(0, 10, "127.0.0.1", 99999999) + master(11, 20, "a", 0) +
                 master(21, 30, "", 7000) + master(31, 40, "::1", 7003));
  auto ranges = redis::slot_ranges_of(r.get());
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].node.name(), "[::1]:7003");
}

// Issue 15, defect 6: the refund spells the member the script wrote. Integer digits: Lua's
// own number formatting wrote 1764600000123456 as 1.7646000001235e+15.
TEST(RedisReplies, TheSlidingLogMemberHasIntegerDigits) {
  EXPECT_EQ(redis::log_member("abc:0:7", 1764600000123456, 3), "abc:0:7:1764600000123456:3");
}

std::string integer(long long v) {
  return ":" + std::to_string(v) + "\r\n";
}

floodgate::store::Item item(std::int64_t capacity, std::int64_t cost, std::string holder = "") {
  floodgate::store::Item i;
  i.key = "rl:r:l:{k}";
  i.params.capacity = capacity;
  i.cost = cost;
  i.leased.holder = std::move(holder);
  return i;
}

// Three requests decided in one call: {now, then per request its status and per item
// admitted, remaining, reset, retry (+ what a lease took)}. The middle one raised an error in
// Redis: it fails alone.
TEST(RedisBatch, EachRequestGetsItsOwnAnswerAndAFailedOneFailsAlone) {
  const std::vector<floodgate::store::Item> one{item(10, 2)};
  const std::vector<floodgate::store::Item> two{item(5, 1), item(100, 1, "holder")};
  // The wrong length for these requests: refused as a whole.
  EXPECT_FALSE(redis::decode_outcomes(parse("*3\r\n" + integer(1) + integer(1) + integer(1)).get(),
                                      {&one, &two, &one}));

  auto ok = parse("*21\r\n" + integer(1'764'600'000'000'000) +                        // now
                  integer(1) + integer(1) + integer(8) + integer(400) + integer(0) +  // one: 8 left
                  integer(-1) + "$9\r\nWRONGTYPE\r\n" + integer(0) + integer(0) +     // two: failed
                  integer(0) + integer(0) + integer(0) + integer(0) + integer(0) + integer(0) +
                  integer(0) + integer(0) + integer(0) + integer(9'000) +
                  integer(250'000));  // the last one: refused, again in 0.25 s
  std::string error;
  auto all = redis::decode_outcomes(ok.get(), {&one, &two, &one}, &error);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 3u);
  const auto* first = std::get_if<floodgate::store::Outcome>(&(*all)[0]);
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->admitted);
  EXPECT_EQ(first->now, 1'764'600'000'000'000);
  ASSERT_EQ(first->decisions.size(), 1u);
  EXPECT_EQ(first->decisions[0].remaining, 8);
  EXPECT_EQ(first->decisions[0].limit, 10);   // its capacity: not in the reply
  EXPECT_EQ(first->decisions[0].granted, 2);  // an item without a holder took its cost
  EXPECT_EQ(std::get<floodgate::store::StoreError>((*all)[1]),
            floodgate::store::StoreError::protocol);
  EXPECT_EQ(error, "WRONGTYPE");
  const auto* third = std::get_if<floodgate::store::Outcome>(&(*all)[2]);
  ASSERT_TRUE(third);
  EXPECT_FALSE(third->admitted);
  EXPECT_EQ(third->decisions[0].retry_after, 250'000);
  EXPECT_EQ(third->decisions[0].granted, 0);

  // A string where a number belongs, in an answer that did not fail: the whole reply is bad.
  auto bad = parse("*6\r\n" + integer(1) + integer(1) + "$1\r\n1\r\n" + integer(0) + integer(0) +
                   integer(0));
  EXPECT_FALSE(redis::decode_outcomes(bad.get(), {&one}));
}

TEST(RedisBatch, ALeasedItemsAnswerSaysWhatItTook) {
  const std::vector<floodgate::store::Item> two{item(5, 1), item(100, 1, "holder")};
  auto r = parse("*11\r\n" + integer(7) + integer(1) + integer(1) + integer(4) + integer(0) +
                 integer(0) + integer(1) + integer(60) + integer(0) + integer(0) + integer(40));
  auto o = redis::decode_outcome(r.get(), two);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->decisions[0].granted, 1);
  EXPECT_EQ(o->decisions[1].granted, 40);
  EXPECT_EQ(o->decisions[1].remaining, 60);
}

// One call's keys and arguments: per request its lease id and item count; per item 7 values,
// and a leased item's three more after its holder, with its leases' key declared beside its key.
TEST(RedisBatch, ArgumentsNameEveryKeyTheLibraryTouches) {
  auto scripts = redis::Scripts::compute();
  const std::vector<floodgate::store::Item> one{item(10, 2)};
  const std::vector<floodgate::store::Item> two{item(5, 1), item(100, 1, "holder")};
  const std::vector<const std::vector<floodgate::store::Item>*> both{&one, &two};
  auto a = redis::acquire_args(both, scripts, redis::Via::fcall, "", "lease-1");
  ASSERT_GE(a.size(), 7u);
  EXPECT_EQ(a[0], "FCALL");
  EXPECT_EQ(a[1], scripts.acquire_fn);
  EXPECT_EQ(a[2], "4");  // three items, one of them leased
  EXPECT_EQ(a[5], "rl:r:l:{k}");
  EXPECT_EQ(a[6], "rl:r:l:{k}:leases");
  EXPECT_EQ(a.size(), 3u + 4 + 1 + (2 + 7) + (2 + 7 + 10));
  EXPECT_EQ(a[8], "lease-1");
  EXPECT_EQ(a[9], "1");
  EXPECT_EQ(a[17], "lease-1");
  EXPECT_EQ(a[18], "2");
  redis::address(a, redis::Script::acquire, redis::Via::evalsha, scripts);
  EXPECT_EQ(a[0], "EVALSHA");
  EXPECT_EQ(a[1], scripts.acquire_sha);
}

// The library is named for its content, so two versions sharing a Redis never replace each
// other's functions, and it starts as FUNCTION LOAD requires.
TEST(RedisBatch, TheLibraryIsNamedForItsContent) {
  auto s = redis::Scripts::compute();
  EXPECT_EQ(s.library.rfind("#!lua name=floodgate_", 0), 0u);
  const auto tag = s.acquire_fn.substr(std::string("fg_acquire_").size());
  EXPECT_EQ(tag.size(), 16u);
  EXPECT_NE(s.library.find("name=floodgate_" + tag + "\n"), std::string::npos);
  EXPECT_EQ(s.adjust_fn, "fg_adjust_" + tag);
  EXPECT_NE(s.acquire_text.find("return acquire(KEYS, ARGV)"), std::string::npos);
}

// What a reply says about sending the call again: each way at most once, in one order (fcall,
// load then fcall, evalsha, eval), and only for errors that mean "not here", not "wrong".
TEST(RedisBatch, ResendsFollowWhatIsMissing) {
  auto error = [](const std::string& e) { return parse("-" + e + "\r\n"); };
  using V = redis::Via;
  EXPECT_EQ(redis::resend_via(error("ERR Function not found").get(), V::fcall), V::load_then_fcall);
  // Still missing behind its FUNCTION LOAD: the load failed; the same code as a script.
  EXPECT_EQ(redis::resend_via(error("ERR Function not found").get(), V::load_then_fcall),
            V::evalsha);
  EXPECT_EQ(redis::resend_via(error("ERR unknown command 'FCALL', with args").get(), V::fcall),
            V::evalsha);
  EXPECT_EQ(redis::resend_via(error("NOPERM this user has no permissions").get(), V::fcall),
            V::evalsha);
  EXPECT_EQ(redis::resend_via(error("NOSCRIPT No matching script").get(), V::evalsha), V::eval);
  EXPECT_EQ(redis::resend_via(error("NOSCRIPT No matching script").get(), V::eval), std::nullopt);
  EXPECT_EQ(redis::resend_via(error("ERR boom").get(), V::fcall), std::nullopt);
  EXPECT_EQ(redis::resend_via(parse(integer(1)).get(), V::fcall), std::nullopt);
}

}  // namespace

// The proxy formats its commands itself (redis_connection.hpp): byte for byte what hiredis
// would send, for empty, binary and long arguments and more than 64 of them.
TEST(RedisWire, CommandsAreFormattedAsHiredisFormatsThem) {
  std::vector<std::vector<std::string>> cases = {
      {"PING"},
      {"FCALL", "fg_acquire_0123", "2", "key:{a}", "key:{a}:leases", "", "1", "0.5"},
      {"SET", std::string("bin\0ary\r\n", 10), std::string(70000, 'x')},
  };
  std::vector<std::string> many{"EVALSHA"};
  for (int i = 0; i < 300; ++i) many.push_back(std::to_string(i * 7919));
  cases.push_back(many);
  for (const auto& c : cases) {
    std::vector<std::string_view> views(c.begin(), c.end());
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : c) argv.push_back(a.data()), lens.push_back(a.size());
    char* expected = nullptr;
    const auto n =
        redisFormatCommandArgv(&expected, static_cast<int>(c.size()), argv.data(), lens.data());
    ASSERT_GT(n, 0);
    std::string ours = "prefix";
    redis::append_command(ours, views);
    EXPECT_EQ(ours, "prefix" + std::string(expected, static_cast<std::size_t>(n))) << c[0];
    redisFreeCommand(expected);
  }
}
