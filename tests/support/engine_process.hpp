// support/engine_process — the real pinned llama-server (from LOCH_BIN_DIR) as a test fixture: started on
// a free localhost port, ready once GET /health answers 200, stopped (SIGTERM → SIGKILL) on destruction.
// Failures throw with the engine's log tail so a test failure shows why the engine did not come up.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "support/http_client.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace loch::test {

#ifdef LOCH_BIN_DIR
inline std::filesystem::path bin_dir() {
    return LOCH_BIN_DIR;
}
#endif

// A port that was free a moment ago (the kernel picks it; the engine binds it right after).
inline std::uint16_t free_port() {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::acceptor acc(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
    return acc.local_endpoint().port();
}

// How to start the engine (defaults fit the tiny synth models).
struct EngineOptions {
    std::chrono::milliseconds startup_timeout{std::chrono::seconds(120)};
    std::filesystem::path exe;       // default: bin_dir()/llama-server
    std::filesystem::path log_file;  // default: a temporary directory removed with the EngineProcess
};

class EngineProcess {
  public:
    using Options = EngineOptions;

    // Starts llama-server for `model` with `extra_args` (e.g. {"-c", "512"}; -m/--host/--port are added)
    // and waits for /health == 200. Retries on another port if the chosen one was taken in between.
    EngineProcess(const std::filesystem::path& model, const std::vector<std::string>& extra_args,
                  const Options& opts = Options{}) {
        std::filesystem::path exe = opts.exe;
#ifdef LOCH_BIN_DIR
        if (exe.empty()) exe = bin_dir() / "llama-server";
#endif
        if (!std::filesystem::exists(exe))
            throw std::runtime_error("llama-server not found at " + exe.string());
        for (int attempt = 0; attempt < 3; ++attempt) {
            port_ = free_port();
            std::vector<std::string> args = {"-m",        model.string(), "--host",
                                             "127.0.0.1", "--port",       std::to_string(port_)};
            args.insert(args.end(), extra_args.begin(), extra_args.end());
            if (opts.log_file.empty() && !log_dir_) log_dir_ = std::make_unique<TempDir>("loch-engine-log");
            const auto log = opts.log_file.empty()
                                 ? log_dir_->path() / ("llama-server." + std::to_string(port_) + ".log")
                                 : opts.log_file;
            process_ = std::make_unique<Process>(exe, args, log);
            if (wait_healthy(opts.startup_timeout)) return;
            const std::string tail = process_->log_tail();
            process_->stop(std::chrono::seconds(5));
            const bool port_taken = tail.find("bind") != std::string::npos ||
                                    tail.find("Address already in use") != std::string::npos;
            if (!port_taken || attempt == 2) {
                throw std::runtime_error("llama-server did not become healthy on port " +
                                         std::to_string(port_) + " (exit status " +
                                         (process_->poll() ? std::to_string(*process_->poll()) : "none") +
                                         "); log tail:\n" + tail);
            }
        }
    }
    explicit EngineProcess(const std::filesystem::path& model) : EngineProcess(model, {}) {}

    EngineProcess(const EngineProcess&) = delete;
    EngineProcess& operator=(const EngineProcess&) = delete;
    ~EngineProcess() = default;  // Process stops the engine

    std::uint16_t port() const {
        return port_;
    }
    std::string base_url() const {
        return "http://127.0.0.1:" + std::to_string(port_);
    }
    Process& process() {
        return *process_;
    }
    std::string log() const {
        return process_->log();
    }
    std::optional<int> stop(std::chrono::milliseconds grace = std::chrono::seconds(10)) {
        return process_->stop(grace);
    }

    HttpResponse get(const std::string& target) const {
        return http_get(port_, target);
    }
    HttpResponse post_json(const std::string& target, const std::string& json) const {
        return http_post_json(port_, target, json);
    }

  private:
    bool wait_healthy(std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            if (process_->poll()) return false;  // exited
            try {
                if (http_get(port_, "/health", std::chrono::seconds(2)).status == 200) return true;
            } catch (const std::exception&) {
                // not listening yet
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return false;
    }

    std::uint16_t port_ = 0;
    std::unique_ptr<TempDir> log_dir_;  // declared before process_: the engine stops before its log goes
    std::unique_ptr<Process> process_;
};

}  // namespace loch::test
