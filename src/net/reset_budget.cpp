#include "reset_budget.hpp"

#include <algorithm>

namespace floodgate::http {

ResetBudget::ResetBudget(std::uint32_t per_second)
    : per_second_(per_second), tokens_(per_second), last_(std::chrono::steady_clock::now()) {}

bool ResetBudget::take(std::chrono::steady_clock::time_point now) {
  const std::chrono::duration<double> elapsed = now - last_;
  last_ = now;
  tokens_ = std::min(per_second_, tokens_ + elapsed.count() * per_second_);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

}  // namespace floodgate::http
