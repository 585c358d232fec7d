// core/off_loop — blocking work (checking a multi-GiB upload, writing a batch's output file) run on a worker
// pool while the awaiting coroutine's thread — loch's one io_context thread — goes on serving. The coroutine
// resumes on its own executor with the work's result, or its exception rethrown.
//
// The work must not touch loch's state (the broker, the server, the batch store's connection): it gets
// copies of what it needs and returns a value that the loop thread then applies.
#pragma once

#include <type_traits>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace loch::core {

// On `ex`: a worker pool's executor (a unit test may pass its own loop's, to run every step itself).
template <class F, class R = std::invoke_result_t<F&>>
boost::asio::awaitable<R> off_loop(boost::asio::any_io_executor ex, F work) {
    co_return co_await boost::asio::co_spawn(
        ex, [work = std::move(work)]() mutable -> boost::asio::awaitable<R> { co_return work(); },
        boost::asio::use_awaitable);
}

template <class F, class R = std::invoke_result_t<F&>>
boost::asio::awaitable<R> off_loop(boost::asio::thread_pool& pool, F work) {
    co_return co_await off_loop(boost::asio::any_io_executor(pool.get_executor()), std::move(work));
}

}  // namespace loch::core
