// The lease book's hand for a window: units belong to the window the store granted them in,
// and a grant's estimate of that window's end carries the round trip's jitter.
#include <gtest/gtest.h>

#include "floodgate/store/leased_store.hpp"

namespace floodgate::store {
namespace {

constexpr limit::Micros kMs = 1000;
constexpr limit::Micros kHour = 3'600'000 * kMs;

Item window_item() {
  Item item;
  item.key = "rl:api:hot:{k}";
  item.params.algorithm = config::Algorithm::fixed_window;
  item.params.capacity = 60;
  item.params.window = kHour;
  item.leased.size = 10;
  item.leased.ttl = 30'000 * kMs;
  return item;
}

limit::Decision grant(std::int64_t units) {
  limit::Decision d;
  d.admitted = true;
  d.limit = 60;
  d.remaining = 60 - units;
  d.granted = units;
  return d;
}

// Two grants of one window, their round trips 2 ms and 5 ms long: the second one's estimate
// of the window's end is 3 ms earlier, and the units in hand stay (they were thrown away,
// counted by the store and spent by nobody, when any difference meant another window).
TEST(LeaseBookWindow, AGrantOfTheSameWindowKeepsTheUnitsInHand) {
  LeaseBook book;
  LeaseBook::GiveBacks back;
  const Item item = window_item();
  const limit::Micros start = 1'000 * kHour;  // the store's window starts here
  limit::Micros now = 5 * kMs;                // this instance's clock

  auto first = book.take(item, now, back);
  ASSERT_FALSE(first.local);
  ASSERT_EQ(first.spare, 9);
  limit::Decision decision;
  auto answer = grant(10);
  book.granted(item, 1, first.spare, first.settled, &answer, now, start + 10 * kMs, now + 2 * kMs,
               decision, back);
  now += 2 * kMs;
  EXPECT_EQ(book.in_hand(item.key, now), 9);

  // Spent down to 4 in hand: below half, a top-up of 6 is asked for.
  LeaseBook::Take t;
  for (int i = 0; i < 5; ++i) t = book.take(item, now, back);
  ASSERT_TRUE(t.local);
  ASSERT_EQ(t.top_up, 6);
  EXPECT_EQ(book.in_hand(item.key, now), 4);
  const limit::Micros sent = now;
  answer = grant(6);
  // The store decided 3 ms into this 5 ms round trip, where the first was decided as it was
  // asked: 2 ms of local time later, the store's clock reads 5 ms later.
  book.granted(item, 0, t.top_up, t.settled, &answer, sent, start + 10 * kMs + 5 * kMs,
               sent + 5 * kMs, decision, back);
  now = sent + 5 * kMs;
  EXPECT_EQ(book.in_hand(item.key, now), 10) << "the same window's units were voided";
  EXPECT_TRUE(back.empty());
}

// A grant from the next window voids what is left of the last one's.
TEST(LeaseBookWindow, AGrantOfTheNextWindowVoidsTheLastOnesUnits) {
  LeaseBook book;
  LeaseBook::GiveBacks back;
  const Item item = window_item();
  const limit::Micros start = 1'000 * kHour;
  limit::Micros now = 5 * kMs;
  auto first = book.take(item, now, back);
  limit::Decision decision;
  auto answer = grant(10);
  // Granted 10 ms before the window ended.
  book.granted(item, 1, first.spare, first.settled, &answer, now, start + kHour - 10 * kMs,
               now + kMs, decision, back);
  now += kMs;
  LeaseBook::Take t;
  for (int i = 0; i < 5; ++i) t = book.take(item, now, back);
  ASSERT_EQ(t.top_up, 6);
  answer = grant(6);
  // Granted in the next window, 1 ms after it began.
  book.granted(item, 0, t.top_up, t.settled, &answer, now, start + kHour + kMs, now + kMs, decision,
               back);
  EXPECT_EQ(book.in_hand(item.key, now + kMs), 6);
}

}  // namespace
}  // namespace floodgate::store
