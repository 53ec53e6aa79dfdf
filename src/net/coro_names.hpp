#pragma once
// The short names the coroutine code of http/ writes Asio and Beast with, in one place.
// Only for .cpp files (and driver.hpp, included by one .cpp only): never an ordinary header,
// since it puts names into floodgate::http.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace floodgate::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::as_tuple;
using asio::use_awaitable;

}  // namespace floodgate::http
