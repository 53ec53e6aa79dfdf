#pragma once
// Streams a client made end abnormally, per connection (HTTP/2's and HTTP/3's): its own
// resets and every reset floodgate sends because of the client's frames (a WINDOW_UPDATE past
// 2^31-1, DATA past content-length: MadeYouReset, CVE-2025-8671; a malformed HTTP/3 message),
// in one token bucket of `per_second`, refilled at that rate. Past it the connection ends
// (HTTP/2: GOAWAY ENHANCE_YOUR_CALM; HTTP/3: H3_EXCESSIVE_LOAD).

#include <chrono>
#include <cstdint>

namespace floodgate::http {

class ResetBudget {
 public:
  explicit ResetBudget(std::uint32_t per_second);
  // Takes one reset; false when the budget is spent.
  bool take(std::chrono::steady_clock::time_point now);

 private:
  double per_second_;
  double tokens_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace floodgate::http
