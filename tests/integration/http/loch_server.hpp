// Test helpers for the end-to-end suite: a `loch serve` process on a generated config, and an SSE client
// that reads a streamed response event by event (so tests can act mid-stream).
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/engine_process.hpp"
#include "support/http_client.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace loch::itest {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline fs::path bin() {
    return LOCH_BIN_DIR;
}

// Waits until `proc` answers 200 on `path` at `port` (polled every `every`); false when it ended first or
// `limit` passed.
inline bool answers(test::Process& proc, std::uint16_t port, const std::string& path,
                    std::chrono::milliseconds limit = 20s, std::chrono::milliseconds every = 50ms) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline && proc.running()) {
        try {
            if (test::http_get(port, path, 1s).status == 200) return true;
        } catch (const std::exception&) {
        }
        std::this_thread::sleep_for(every);
    }
    return false;
}

// `loch serve --config <dir>/loch.yaml --port <free>`, ready once /health answers.
class LochServer {
  public:
    // `port` 0: a free one (tried three times); else exactly that one (a restart on the same address).
    LochServer(const fs::path& dir, const std::string& yaml, std::vector<std::string> extra = {},
               std::uint16_t port = 0)
        : dir_(dir) {
        config_ = dir / "loch.yaml";
        std::ofstream(config_) << yaml;
        for (int attempt = 0; attempt < 3; ++attempt) {
            port_ = port ? port : test::free_port();
            std::vector<std::string> args = {"serve", "--config", config_.string(), "--port",
                                             std::to_string(port_)};
            args.insert(args.end(), extra.begin(), extra.end());
            proc_.emplace(bin() / "loch", args, dir / ("loch." + std::to_string(port_) + ".log"));
            if (answers(*proc_, port_, "/health")) return;
            if (proc_->log().find("cannot listen") == std::string::npos) break;
        }
        throw std::runtime_error("loch serve did not come up; log:\n" + proc_->log_tail());
    }

    // Every test case ends with these checks, whatever it did: loch is still running, still answers
    // /health and /loch/status, exits 0 on SIGTERM, and no sanitizer reported anything. A test that kills
    // loch on purpose says so with expect_exit().
    ~LochServer() {
        if (!proc_) return;
        if (expect_exit_) {
            proc_->stop(std::chrono::seconds(5));
            return;
        }
        if (!proc_->running()) {
            ADD_FAILURE() << "loch died during the test (status " << proc_->poll().value_or(-1)
                          << "); log tail:\n"
                          << proc_->log_tail(8000);
            return;
        }
        try {
            const auto h = test::http_get(port_, "/health", 10s);
            const auto st = test::http_get(port_, "/loch/status", 30s);
            // (401: the test configured api_keys; loch answered, which is what is checked here.)
            if (h.status != 200 || (st.status != 200 && st.status != 401))
                ADD_FAILURE() << "loch no longer serving after the test: /health " << h.status
                              << ", /loch/status " << st.status;
        } catch (const std::exception& e) {
            ADD_FAILURE() << "loch no longer answers after the test: " << e.what() << "\nlog tail:\n"
                          << proc_->log_tail(8000);
        }
        const auto status = proc_->stop(std::chrono::seconds(40));
        const std::string log = proc_->log();
        if (status.value_or(-1) != 0)
            ADD_FAILURE() << "loch did not exit cleanly on SIGTERM (status " << status.value_or(-1)
                          << "); log tail:\n"
                          << proc_->log_tail(8000);
        for (const char* marker : {"AddressSanitizer", "LeakSanitizer", "runtime error:"})
            if (log.find(marker) != std::string::npos)
                ADD_FAILURE() << "sanitizer report in loch's log:\n" << proc_->log_tail(16000);
    }
    LochServer(const LochServer&) = delete;
    LochServer& operator=(const LochServer&) = delete;
    void expect_exit() { expect_exit_ = true; }

    std::uint16_t port() const { return port_; }
    test::Process& process() { return *proc_; }
    std::string log() const { return proc_->log(); }

    test::HttpResponse get(const std::string& target) { return test::http_get(port_, target, 120s); }
    test::HttpResponse post(const std::string& target, const std::string& body) {
        return test::http_post_json(port_, target, body, 300s);
    }
    // A POST under the client's own X-Request-Id (what cancel finds it by).
    test::HttpResponse post_as(const std::string& id, const std::string& target, const std::string& body) {
        test::HttpRequest r;
        r.method = boost::beast::http::verb::post;
        r.port = port_;
        r.target = target;
        r.body = body;
        r.content_type = "application/json";
        r.headers["X-Request-Id"] = id;
        r.timeout = 300s;
        return test::http_request(std::move(r));
    }
    test::HttpResponse del(const std::string& target) {
        test::HttpRequest r;
        r.method = boost::beast::http::verb::delete_;
        r.port = port_;
        r.target = target;
        r.timeout = 60s;
        return test::http_request(std::move(r));
    }
    // The request `id` in GET /loch/requests once it is in `state` (null json after `limit`).
    nlohmann::json in_flight(const std::string& id, const std::string& state,
                             std::chrono::seconds limit = 30s) {
        const auto until = std::chrono::steady_clock::now() + limit;
        do {  // (looked at once at least: a limit of 0 asks about now)
            const auto list = nlohmann::json::parse(get("/loch/requests").body);
            for (const auto& r : list["requests"])
                if ((id.empty() || r["id"] == id) && r["state"] == state) return r;
            std::this_thread::sleep_for(50ms);
        } while (std::chrono::steady_clock::now() < until);
        return {};
    }
    nlohmann::json status() { return nlohmann::json::parse(get("/loch/status").body); }
    nlohmann::json engine_status(const std::string& model) {
        const auto st = status();  // (not `status()["engines"]` in the loop head: the temporary would dangle)
        for (const auto& e : st["engines"])
            if (e["name"] == model) return e;
        return {};
    }
    std::optional<int> engine_pid(const std::string& model) {
        auto e = engine_status(model);
        if (e.contains("engine") && e["engine"].contains("pid") && e["engine"]["pid"].is_number())
            return e["engine"]["pid"].get<int>();
        return std::nullopt;
    }

  private:
    fs::path dir_, config_;
    std::uint16_t port_ = 0;
    std::optional<test::Process> proc_;
    bool expect_exit_ = false;
};

// A streaming POST read incrementally: status and headers first, then one SSE event at a time. (Beast behind
// a pimpl, compiled once in loch_server.cpp.)
class SseClient {
  public:
    // `read_head` false: only sends the request (a client that may leave before any answer).
    SseClient(std::uint16_t port, const std::string& target, const std::string& body, bool read_head = true);
    ~SseClient();
    SseClient(const SseClient&) = delete;
    SseClient& operator=(const SseClient&) = delete;

    int status() const;
    const std::string& content_type() const;
    // The next complete event; nullopt at the end of the stream. Throws on a read error or timeout.
    std::optional<std::string> next_event(std::chrono::seconds timeout = 120s);
    // Everything that is left (for non-SSE bodies).
    std::string rest();
    void close();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The JSON of a `data: {...}` event; null for [DONE] and non-data events.
inline nlohmann::json event_json(const std::string& event) {
    const auto pos = event.find("data: ");
    if (pos == std::string::npos) return nullptr;
    auto data = event.substr(pos + 6);
    while (!data.empty() && (data.back() == '\n' || data.back() == '\r')) data.pop_back();
    return nlohmann::json::parse(data, nullptr, false);
}

// A variable of a running process's environment (/proc/PID/environ; the tests run as the same user).
inline std::optional<std::string> process_env(int pid, const std::string& name) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string key = name + "=";
    for (std::size_t start = 0; start < env.size();) {
        const auto end = env.find('\0', start);
        const auto var = env.substr(start, end == std::string::npos ? std::string::npos : end - start);
        if (var.starts_with(key)) return var.substr(key.size());
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return std::nullopt;
}

// GET on an engine's own port with the secret loch gave it (read from the engine's environment).
inline test::HttpResponse engine_get(int engine_pid, std::uint16_t engine_port, const std::string& target) {
    test::HttpRequest req;
    req.port = engine_port;
    req.target = target;
    req.timeout = 5s;
    if (auto key = process_env(engine_pid, "LLAMA_API_KEY")) req.headers["Authorization"] = "Bearer " + *key;
    return test::http_request(req);
}

inline bool process_alive(int pid) {
    // A zombie still "exists" for kill(0); /proc/PID/stat state 'Z' counts as gone.
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    if (!std::getline(stat, s)) return false;
    const auto close = s.rfind(')');
    return close != std::string::npos && close + 2 < s.size() && s[close + 2] != 'Z';
}

}  // namespace loch::itest
