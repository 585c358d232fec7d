// Issue 53: the coding agents people point at their own GPU — Claude Code (`claude -p`) and Codex
// (`codex exec`), the official CLIs from npm (scripts/setup.sh --all installs the pinned versions) — against
// `loch serve` on its embedded default with the demo model, configured only as README.md says. Each exits 0
// after one prompt, and loch's request log has its requests answered with 200 on the agent's route.
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "fixtures.hpp"

namespace loch::itest {
namespace {

fs::path agents_bin() {
    const char* p = std::getenv("LOCH_TEST_AGENTS");
    return p && *p ? fs::path(p) : fs::path("/var/cache/loch/agents/node_modules/.bin");
}

// `loch serve` as the README's first command runs it: no config, the demo in ./models.
struct EmbeddedDefault {
    explicit EmbeddedDefault(const fs::path& dir) {
        fs::create_directories(dir / "models");
        fs::copy_file(models().demo.path(), dir / "models" / "demo.gguf");
        port = test::free_port();
        proc.emplace(bin() / "loch",
                     std::vector<std::string>{"serve", "--models-dir", (dir / "models").string(), "--port",
                                              std::to_string(port), "--state-dir", (dir / "state").string(),
                                              "--log-dir", (dir / "logs").string()},
                     dir / "loch.log");
        if (answers(*proc, port, "/health")) return;
        throw std::runtime_error("loch serve did not come up:\n" + proc->log_tail());
    }
    std::uint16_t port = 0;
    std::optional<test::Process> proc;
};

// The request log's lines on `route`: their statuses.
std::vector<int> statuses(const fs::path& log, const std::string& route) {
    std::vector<int> out;
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
        const auto j = json::parse(line, nullptr, false);
        if (j.is_object() && j.value("route", "") == route) out.push_back(j.value("status", 0));
    }
    return out;
}

std::string text_of(const fs::path& file) {
    std::ifstream in(file);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int run_agent(const fs::path& dir, const std::vector<std::string>& env_and_argv, const std::string& name) {
    test::Process agent("/usr/bin/env", env_and_argv, dir / (name + ".log"));
    const auto rc = agent.wait_for(std::chrono::minutes(8));
    return rc.value_or(-1);
}

TEST(CodingAgents, ClaudeCodeAndCodexFinishAPromptOnTheEmbeddedDefault) {
    const fs::path claude = agents_bin() / "claude", codex = agents_bin() / "codex";
    ASSERT_TRUE(fs::exists(claude) && fs::exists(codex))
        << "the coding agents are not installed in " << agents_bin()
        << ": bash scripts/setup.sh --all installs them (or set LOCH_TEST_AGENTS)";
    test::TempDir dir{"loch-itest-agents"};
    EmbeddedDefault loch(dir.path());
    const std::string url = "http://127.0.0.1:" + std::to_string(loch.port);
    fs::create_directories(dir.path() / "home" / ".codex");
    fs::create_directories(dir.path() / "work");
    const std::string home = "HOME=" + (dir.path() / "home").string();

    // Claude Code, with the README's line: ANTHROPIC_BASE_URL, any key (loch asks for none here), and an
    // output budget that fits the demo's 32k slot beside its prompt.
    const int claude_rc = run_agent(
        dir.path(),
        {home, "ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=loch", "CLAUDE_CODE_MAX_OUTPUT_TOKENS=4096",
         "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", claude.string(), "-p",
         "Say hi", "--model", "demo"},
        "claude");
    std::this_thread::sleep_for(300ms);  // the request log's flush
    EXPECT_EQ(claude_rc, 0) << text_of(dir.path() / "claude.log") << "\n" << loch.proc->log_tail();
    const auto messages = statuses(dir.path() / "logs" / "requests.jsonl", "/v1/messages");
    ASSERT_FALSE(messages.empty()) << loch.proc->log_tail();
    for (int s : messages) EXPECT_EQ(s, 200) << text_of(dir.path() / "logs" / "requests.jsonl");

    // Codex, with the README's line: loch's /v1 as a model provider speaking the Responses API.
    const int codex_rc = run_agent(
        dir.path(),
        {home, codex.string(), "exec", "--skip-git-repo-check", "-C", (dir.path() / "work").string(), "-m",
         "demo", "-c", "model_provider=loch", "-c",
         "model_providers.loch={name=\"loch\",base_url=\"" + url + "/v1\",wire_api=\"responses\"}", "Say hi"},
        "codex");
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(codex_rc, 0) << text_of(dir.path() / "codex.log") << "\n" << loch.proc->log_tail();
    const auto responses = statuses(dir.path() / "logs" / "requests.jsonl", "/v1/responses");
    ASSERT_FALSE(responses.empty()) << loch.proc->log_tail();
    for (int s : responses) EXPECT_EQ(s, 200) << text_of(dir.path() / "logs" / "requests.jsonl");
    // loch still answers.
    EXPECT_EQ(test::http_get(loch.port, "/health", 5s).status, 200);
}

}  // namespace
}  // namespace loch::itest
