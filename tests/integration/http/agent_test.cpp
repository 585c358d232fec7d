// loch's agent port as HAProxy's agent-check uses it (issue 30): one line in, one line out, the connection
// closed after; answers for a model that is resident, one that would load, one that can never fit and one
// nobody configured; a key required once loch has api_keys; a silent or flooding client closed, and loch
// still answering.
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "fixtures.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;

namespace {

namespace asio = boost::asio;

// Sends `line` to the agent port and reads until the agent closes; the answer.
std::string ask_agent(std::uint16_t port, const std::string& line) {
    asio::io_context ioc;
    asio::ip::tcp::socket s(ioc);
    s.connect({asio::ip::make_address("127.0.0.1"), port});
    asio::write(s, asio::buffer(line));
    std::string out;
    boost::system::error_code ec;
    asio::read(s, asio::dynamic_buffer(out), ec);  // to EOF: the agent closes after its line
    return out;
}

std::string agent_config(const test::TempDir& dir, std::uint16_t port, const std::string& extra = "") {
    const fs::path file = models().longctx.path();
    return config(dir, "400MiB",
                  model_entry("chat", models().tiny.path(), kArgs) + "  - name: huge\n    path: " +
                      file.string() + "\n    args: {ctx: 1048576, parallel: 1, ctx_extension: yarn}\n",
                  "agent: {port: " + std::to_string(port) + "}\n" + extra);
}

}  // namespace

TEST(Agent, AnswersEachModelInHAProxysWordsOneLineAndCloses) {
    test::TempDir dir("loch-itest-agent");
    const auto port = test::free_port();
    LochServer loch(dir.path(), agent_config(dir, port));
    // Its memory is estimated on the first question: "up 1%" until then, never a wrong "down".
    std::string first = ask_agent(port, "chat\n");
    for (int i = 0; i < 100 && first.find("estimating") != std::string::npos; ++i) {
        std::this_thread::sleep_for(50ms);
        first = ask_agent(port, "chat\n");
    }
    EXPECT_EQ(first.rfind("ready up ", 0), 0u) << first;
    EXPECT_NE(first.find("fits now"), std::string::npos) << first;
    EXPECT_EQ(first.find('\n'), first.size() - 1) << first;
    EXPECT_EQ(ask_agent(port, "chat resident\n").rfind("drain", 0), 0u);

    ASSERT_EQ(loch.post("/v1/chat/completions", chat("chat", false, 2)).status, 200);
    EXPECT_EQ(ask_agent(port, "chat\n").rfind("ready up 100% maxconn:", 0), 0u);
    EXPECT_EQ(ask_agent(port, "chat resident\n").rfind("ready up 100%", 0), 0u);

    std::string huge = ask_agent(port, "huge\n");
    for (int i = 0; i < 100 && huge.find("estimating") != std::string::npos; ++i) {
        std::this_thread::sleep_for(50ms);
        huge = ask_agent(port, "huge\n");
    }
    EXPECT_EQ(huge.rfind("down #never fits here", 0), 0u) << huge;
    EXPECT_EQ(ask_agent(port, "nobody\n").rfind("down", 0), 0u);
    EXPECT_EQ(ask_agent(port, "\n").rfind("down #loch's agent expects", 0), 0u);

    // A client that sends nothing is closed (2 s); one that floods without a newline too; loch answers.
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ask_agent(port, ""), "");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
    EXPECT_EQ(ask_agent(port, std::string(4096, 'x')), "");
    EXPECT_EQ(ask_agent(port, "chat\n").rfind("ready up", 0), 0u);
}

TEST(Agent, WithApiKeysTheLineMustCarryOne) {
    test::TempDir dir("loch-itest-agent");
    const auto port = test::free_port();
    LochServer loch(dir.path(), agent_config(dir, port, "api_keys: [s3cret]\n"));
    EXPECT_EQ(ask_agent(port, "chat\n").rfind("down #unauthorized", 0), 0u);
    EXPECT_EQ(ask_agent(port, "chat key=wrong\n").rfind("down #unauthorized", 0), 0u);
    EXPECT_NE(ask_agent(port, "chat key=s3cret\n").rfind("down #unauthorized", 0), 0u);
}
