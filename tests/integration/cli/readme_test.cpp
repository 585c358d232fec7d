// The README is a script (issue 27): every indented command block of "Two commands" and "Quick start" runs,
// in order, from the repository root, as a newcomer would paste it. Three adjustments only, the ones a person
// makes without thinking: the README's first command runs `loch serve` in the foreground (here: in the
// background, and the next block waits for it to answer), `bash scripts/test.sh` is this very suite
// (skipped), and curl fails on an HTTP error (a .curlrc with --fail-with-body), so that an error answer fails
// the block instead of scrolling by. After each block every loch it started still answers /health.
#include <csignal>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/http_client.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct Block {
    std::string section;
    std::string text;
};

// The indented (4-space) code blocks of the sections that are meant to be run, in order.
std::vector<Block> runnable_blocks(const fs::path& readme) {
    std::ifstream in(readme);
    std::vector<Block> out;
    std::string line, section;
    bool in_fence = false, in_block = false;
    while (std::getline(in, line)) {
        if (line.starts_with("```")) in_fence = !in_fence;
        if (in_fence) continue;
        if (line.starts_with("## ")) section = line.substr(3);
        const bool runnable = section.starts_with("Two commands") || section.starts_with("Quick start");
        if (runnable && line.starts_with("    ")) {
            if (!in_block) out.push_back({section, ""});
            out.back().text += line.substr(4) + "\n";
            in_block = true;
        } else if (!line.empty()) {
            in_block = false;
        }
    }
    return out;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST(Readme, EveryBlockRunsInOrderAsWritten) {
    const fs::path root = LOCH_SOURCE_DIR;
    const auto blocks = runnable_blocks(root / "README.md");
    ASSERT_GE(blocks.size(), 6u) << "the README's blocks were not found";
    loch::test::TempDir tmp("loch-readme");
    const fs::path pids = tmp.path() / "pids";
    // Background processes of a block are remembered (to stop them at the end) and waited for on their port.
    // curl fails on an HTTP error (unless the line already says how: `curl -sf`), within 5 minutes.
    const std::string prelude =
        "set -euo pipefail\n"
        "curl() { case \" $* \" in *\" -sf \"*|*\" -f \"*) command curl -m 300 \"$@\";; "
        "*) command curl -m 300 -sS --fail-with-body \"$@\";; esac; }\n"
        "cd " +
        root.string() + "\n";
    // "bash scripts/setup.sh && build/bin/loch serve": the setup, then loch in the background.
    const std::regex serve_fg(R"(^(?:(.*?)\s*&&\s*)?(build/bin/loch serve)\s*$)");
    const std::regex serve_bg(R"(^(.*build/bin/loch serve.*)&\s*$)");
    std::vector<std::uint16_t> ports;
    int ran = 0;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        const auto& b = blocks[i];
        if (b.text.find("scripts/test.sh") != std::string::npos) continue;  // this suite itself
        std::string script = prelude;
        std::istringstream lines(b.text);
        std::string l;
        bool in_heredoc = false;
        std::string heredoc_end;
        while (std::getline(lines, l)) {
            std::smatch m;
            if (in_heredoc) {
                script += l + "\n";
                if (l == heredoc_end) in_heredoc = false;
                continue;
            }
            if (const auto h = l.find("<<'"); h != std::string::npos) {
                in_heredoc = true;
                heredoc_end = l.substr(h + 3, l.find('\'', h + 3) - h - 3);
                script += l + "\n";
                continue;
            }
            if (std::regex_match(l, m, serve_fg)) {
                if (m[1].matched) script += m[1].str() + "\n";
                script += m[2].str() + " >" + (tmp.path() / "serve.log").string() + " 2>&1 & echo $! >>" +
                          pids.string() + "\n" +
                          "until curl -sf http://127.0.0.1:8080/health >/dev/null; do sleep 0.2; done\n";
                ports.push_back(8080);
                continue;
            }
            if (std::regex_match(l, m, serve_bg)) {
                script += m[1].str() + " >>" + (tmp.path() / "serve.log").string() + " 2>&1 & echo $! >>" +
                          pids.string() + "\n";
                continue;
            }
            script += l + "\n";
        }
        for (const auto& [key, port] : {std::pair{"port: 8081", 8081}, std::pair{"port: 8082", 8082}})
            if (b.text.find(key) != std::string::npos) ports.push_back(static_cast<std::uint16_t>(port));
        const fs::path file = tmp.path() / ("block" + std::to_string(i) + ".sh");
        std::ofstream(file) << script;
        const fs::path log = tmp.path() / ("block" + std::to_string(i) + ".log");
        const int status = loch::test::run_to_completion("/bin/bash", {file.string()}, log, 900s);
        ++ran;
        EXPECT_EQ(status, 0) << "README block " << i << " (" << b.section << ") failed:\n"
                             << b.text << "\n--- its output:\n"
                             << slurp(log) << "\n--- loch's log:\n"
                             << slurp(tmp.path() / "serve.log");
        for (auto p : ports)
            EXPECT_EQ(loch::test::http_get(p, "/health", 10s).status, 200)
                << "loch on port " << p << " after block " << i;
        if (status != 0) break;
    }
    EXPECT_GE(ran, 6);
    // Stop every loch the README started (each stops its engines), and what the README left in the checkout.
    std::ifstream pid_in(pids);
    for (int pid; pid_in >> pid;) ::kill(pid, SIGTERM);
    std::this_thread::sleep_for(3s);
    std::error_code ec;
    for (const char* p :
         {"images.yaml", "speech.yaml", "talk.wav", ".loch-images", ".loch-speech", "models/images"})
        fs::remove_all(root / p, ec);
}
