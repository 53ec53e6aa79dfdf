// on_exceed: delay through the proxy (nginx's limit_req with burst, without nodelay): a burst
// of concurrent requests over a bucket is forwarded in turn as its units refill, up to
// max_delay; beyond it, and beyond server.max_delayed requests held at once, 429 as usual.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <vector>

#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "timing.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Answer {
  int status = -1;
  double seconds = 0;
};

// `n` requests at once, each on its own connection: status and time to its answer.
std::vector<Answer> delay_burst(std::uint16_t port, int n) {
  std::vector<std::future<Answer>> pending;
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i)
    pending.push_back(std::async(std::launch::async, [port, start] {
      auto r = get(port, "/x");
      return Answer{r ? static_cast<int>(r->result_int()) : -1,
                    std::chrono::duration<double>(Clock::now() - start).count()};
    }));
  std::vector<Answer> out;
  for (auto& p : pending) out.push_back(p.get());
  std::sort(out.begin(), out.end(),
            [](const Answer& a, const Answer& b) { return a.seconds < b.seconds; });
  return out;
}

long count(const std::vector<Answer>& answers, int status) {
  return std::count_if(answers.begin(), answers.end(),
                       [status](const Answer& a) { return a.status == status; });
}

std::string config(const Origin& origin, const std::string& server_extra = "") {
  return ProxyYaml{.upstream_url = http_url(origin),
                   .server_extra = server_extra,
                   .route_extra =
                       "    limits:\n      - { name: paced, algorithm: token_bucket, "
                       "capacity: 1, refill_rate: 5/s, key: [ip], on_exceed: delay, "
                       "max_delay: 1s }\n"}
      .text();
}

TEST(Delay, ABurstIsForwardedInTurnUpToMaxDelayThenRefused) {
  Origin origin;
  Proxy proxy(config(origin));
  // 1 at once, 5 held 0.2 s apart (max_delay 1 s at 5/s: 5 units of queue), the 7th refused.
  const auto answers = delay_burst(proxy.port(), 7);
  EXPECT_EQ(count(answers, 200), 6);
  EXPECT_EQ(count(answers, 429), 1);
  // The admitted ones, in time order: the first at once (what an unlimited request takes
  // here: the measure the others are held beyond), the last about a second after it, each
  // about 0.2 s after the one before.
  std::vector<double> admitted;
  for (const auto& a : answers)
    if (a.status == 200) admitted.push_back(a.seconds);
  ASSERT_EQ(admitted.size(), 6u);
  const double at_once = admitted.front();
  const double headroom =
      std::chrono::duration<double>(slack(std::chrono::milliseconds(150))).count();
  EXPECT_LT(at_once, headroom);
  for (const auto& a : answers) {
    if (a.status == 429) {
      EXPECT_LT(a.seconds, at_once + headroom) << "the refusal is answered at once";
    }
  }
  EXPECT_GT(admitted.back() - at_once, 0.9);  // five held 0.2 s apart: 1 s, less a timer's grain
  EXPECT_LT(admitted.back() - at_once, 1.0 + headroom);
  for (std::size_t i = 1; i < admitted.size(); ++i) EXPECT_GT(admitted[i] - admitted[i - 1], 0.1);
  EXPECT_EQ(origin.requests(), 6u);
  const auto text = admin::render_prometheus(proxy.metrics());
  EXPECT_NE(text.find("\nfloodgate_delayed_requests_total 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nfloodgate_delayed_requests 0\n"), std::string::npos);
}

TEST(Delay, NoMoreThanMaxDelayedAreHeldAtOnce) {
  Origin origin;
  Proxy proxy(config(origin, "  max_delayed: 2\n"));
  const auto answers = delay_burst(proxy.port(), 7);
  EXPECT_EQ(count(answers, 200), 3);  // one at once, two held
  EXPECT_EQ(count(answers, 429), 4);
}

}  // namespace
}  // namespace floodgate::testing
