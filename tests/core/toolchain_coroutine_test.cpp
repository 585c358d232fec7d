// The pattern behind the crash of POST /loch/plan and GET /loch/engines/{name}/log (issue 8, item 1): a
// coroutine takes a std::string by value and co_awaits co_spawn of a lambda coroutine that captures it.
// g++ 12.2 destroys the lambda's captured copy twice (double free: "free(): invalid pointer", SIGABRT or
// SIGSEGV a moment after the answer was written). clang++-19 compiles it correctly; docs/toolchain.md.
// This test fails (crashes, or ASan reports a double free) with a compiler that has the defect.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace asio = boost::asio;

namespace {

struct Owner {
    asio::strand<asio::any_io_executor> strand;
    std::vector<std::string> seen;

    asio::awaitable<std::string> ask(std::string name, std::shared_ptr<int> token) {
        co_return co_await asio::co_spawn(
            strand,
            [this, name, token]() -> asio::awaitable<std::string> {
                seen.push_back(name);
                co_return name + "#" + std::to_string(*token);
            },
            asio::use_awaitable);
    }
};

asio::awaitable<void> drive(Owner& o, std::vector<std::string>& answers) {
    for (int i = 0; i < 50; ++i) {
        // Longer than the small-string buffer, so that a double free touches the heap.
        const std::string name = "a-model-name-longer-than-the-sso-buffer-" + std::to_string(i);
        answers.push_back(co_await o.ask(name, std::make_shared<int>(i)));
    }
}

}  // namespace

TEST(ToolchainCoroutines, LambdaCapturesOfByValueParametersSurviveCoSpawn) {
    asio::io_context io;
    Owner o{asio::make_strand(io.get_executor()), {}};
    std::vector<std::string> answers;
    asio::co_spawn(io, drive(o, answers), asio::detached);
    io.run();
    ASSERT_EQ(answers.size(), 50u);
    EXPECT_EQ(answers[7], "a-model-name-longer-than-the-sso-buffer-7#7");
    EXPECT_EQ(o.seen[49], "a-model-name-longer-than-the-sso-buffer-49");
}
