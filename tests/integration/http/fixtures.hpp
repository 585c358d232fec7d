// Shared by the end-to-end suites: generated models, config snippets and request bodies.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "loch_server.hpp"
#include "support/synth_model.hpp"

namespace loch::itest {

using nlohmann::json;

// Small models shared by the suite (generated once).
struct Models {
    test::SynthModel tiny{{"--preset", "tiny-llama", "--weights", "small"}, "tiny.gguf"};
    test::SynthModel tiny2{{"--preset", "tiny-qwen2", "--weights", "small"}, "tiny2.gguf"};
    test::SynthModel demo{{"--preset", "demo"}, "demo.gguf"};
    // A long training context so that a stream can run for many seconds (mid-stream tests act on it).
    test::SynthModel longctx{{"--preset", "tiny-llama", "--weights", "small", "--ctx", "65536"}, "long.gguf"};
    // A vision projector for `tiny` (LLaVA's layout, 56 px: 16 tokens per image).
    test::SynthModel mmproj{{"--mmproj", "llava-tiny", "--text-embd", "256"}, "mmproj.gguf"};
};
inline Models& models() {
    static Models m;
    return m;
}

// The Python with the pinned client peers (scripts/setup.sh --all: openai, anthropic, ollama,
// prometheus_client).
inline fs::path python() {
    const char* p = std::getenv("LOCH_TEST_PYTHON");
    return p && *p ? fs::path(p) : fs::path("/var/cache/loch/py/bin/python3");
}

// A process's resident memory now (/proc/PID/status VmRSS), in bytes; 0 when it is gone.
inline std::uint64_t rss_bytes(int pid) {
    std::ifstream st("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(st, line))
        if (line.starts_with("VmRSS:")) return std::stoull(line.substr(6)) * 1024;
    return 0;
}

inline std::string model_entry(const std::string& name, const fs::path& path, const std::string& more = "") {
    return "  - name: " + name + "\n    path: " + path.string() + "\n" + more;
}

// A config with the CPU budget `budget` and the given model entries.
inline std::string config(const test::TempDir& dir, const std::string& budget, const std::string& entries,
                          const std::string& global = "") {
    return "listen: 127.0.0.1\n"
           "state_dir: " +
           (dir.path() / "state").string() +
           "\n"
           "engine_dir: " +
           bin().string() + "\n" + global + "devices:\n  cpu:\n    budget: " + budget +
           "\n"
           "models:\n" +
           entries;
}

inline std::string chat(const std::string& model, bool stream, int max_tokens,
                        const std::string& extra = "") {
    json j = {{"model", model},
              {"stream", stream},
              {"max_tokens", max_tokens},
              {"temperature", 0},
              {"seed", 42},
              {"messages", json::array({{{"role", "user"}, {"content", "Say something."}}})}};
    if (!extra.empty()) j.update(json::parse(extra));
    return j.dump();
}

// A stream long enough to act on mid-way (tens of seconds): no EOS, many tokens.
inline std::string long_stream(const std::string& model) {
    return chat(model, true, 30000, R"({"ignore_eos":true})");
}

// A test peer (tests/peers/NAME): a real client program.
inline fs::path peer(const std::string& name) {
    return fs::path(LOCH_SOURCE_DIR) / "tests/peers" / name;
}

// Runs a program to its end; its exit status and output.
inline std::pair<int, std::string> run(const fs::path& exe, const std::vector<std::string>& args,
                                       const fs::path& log, std::chrono::seconds timeout = 120s) {
    const int rc = test::run_to_completion(exe, args, log, timeout);
    std::ifstream in(log);
    return {rc, std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())};
}

// The last line of a peer's output: its JSON verdict.
inline json last_json_line(const std::string& out) {
    auto end = out.find_last_not_of('\n');
    auto start = out.rfind('\n', end);
    return json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end + 1), nullptr, false);
}

inline const std::string kArgs = "    args:\n      ctx: 4096\n      parallel: 1\n      threads: 1\n";
inline const std::string kLongArgs = "    args:\n      ctx: 32768\n      parallel: 1\n      threads: 1\n";
inline std::string long_model(const std::string& more = "") {
    return model_entry("tiny", models().longctx.path(), kLongArgs + more);
}

}  // namespace loch::itest
