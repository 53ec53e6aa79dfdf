#include "changed_on.hpp"

#include "coro_names.hpp"

namespace floodgate::http {

asio::awaitable<bool> changed_on(asio::steady_timer& timer, std::chrono::milliseconds timeout) {
  timer.expires_after(timeout);
  auto [ec] = co_await timer.async_wait(as_tuple(use_awaitable));
  co_return ec == asio::error::operation_aborted;
}

}  // namespace floodgate::http
