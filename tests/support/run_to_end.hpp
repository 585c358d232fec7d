// Runs one coroutine on an io_context until the context has nothing left to do, and returns its value (or
// throws what it threw): for tests of owners whose work is all on one loop.
#pragma once

#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

namespace loch::test {

template <class T>
T run_to_end(boost::asio::io_context& io, boost::asio::awaitable<T> a) {
    auto f = boost::asio::co_spawn(io, std::move(a), boost::asio::use_future);
    io.restart();
    io.run();
    return f.get();
}

}  // namespace loch::test
