// The supervisor against the real pinned llama-server (LOCH_BIN_DIR) and tiny loch-synth models: start →
// ready → stop, a SIGSEGV classified with its log tail, the startup timeout, a bad model file, the log
// ring and file, the measured footprint from the -lv 4 log, and PDEATHSIG.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <csignal>
#include <fstream>
#include <iostream>
#include <thread>

#include "config/config.hpp"
#include "engines/engine.hpp"
#include "engines/kind.hpp"
#include "engines/kinds/llama_server.hpp"
#include "engines/process.hpp"
#include "plan/engine_log.hpp"
#include "support/process.hpp"
#include "support/synth_model.hpp"
#include "support/temp_dir.hpp"

namespace loch::engines {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

template <class T>
T run(asio::io_context& ioc, asio::awaitable<T> aw) {
    auto fut = asio::co_spawn(ioc, std::move(aw), asio::use_future);
    ioc.restart();
    while (fut.wait_for(0s) != std::future_status::ready) ioc.run_one_for(50ms);
    return fut.get();
}

bool alive(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(in, text)) return false;
    const auto close = text.rfind(')');
    return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

bool wait_gone(pid_t pid, std::chrono::milliseconds max = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + max;
    while (alive(pid) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
    return !alive(pid);
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class LlamaServer : public ::testing::Test {
  protected:
    static void SetUpTestSuite() { model_ = new test::SynthModel(test::SynthModel::preset("tiny-llama")); }
    static void TearDownTestSuite() {
        delete model_;
        model_ = nullptr;
    }

    // The config a user would write for this model, resolved the way `loch serve` resolves it.
    config::Config make_config(const std::filesystem::path& model_path) {
        const std::string yaml =
            "engine_dir: " + std::string(LOCH_BIN_DIR) + "\nlog_dir: " + (dir / "logs").string() +
            "\nstop_grace: 5s\nmodels:\n  - name: tiny\n    path: " + model_path.string() +
            "\n    args: {ctx: 512, parallel: 1, n_gpu_layers: 0, threads: 2}\n"
            "    startup_timeout: 120s\n";
        config::LoadContext ctx;
        ctx.cwd = dir.path();
        ctx.default_state_dir = dir / "state";
        ctx.check_files = true;
        ctx.kinds = kind_schemas();
        return config::parse_config(yaml, dir / "loch.yaml", ctx);
    }
    std::shared_ptr<Engine> make_engine(const std::filesystem::path& model_path, StateFile* state = nullptr) {
        const auto cfg = make_config(model_path);
        return Engine::create(ioc.get_executor(), make_engine_spec(cfg, cfg.models.at(0)), state);
    }

    static test::SynthModel* model_;
    asio::io_context ioc;
    test::TempDir dir{"loch-itest-engines"};
};
test::SynthModel* LlamaServer::model_ = nullptr;

TEST_F(LlamaServer, StartsReadyReportsFootprintAndStops) {
    StateFile state(dir / "state");
    auto e = make_engine(model_->path(), &state);
    const StartResult r = run(ioc, e->start());
    ASSERT_TRUE(r.ready) << r.failure->summary << "\n" << read_file(e->log_file());
    EXPECT_EQ(e->state(), EngineState::ready);
    EXPECT_GT(r.took.count(), 0);
    const pid_t pid = *e->pid();
    EXPECT_TRUE(alive(pid));
    EXPECT_EQ(state.records().at(0).pid, pid);

    // Ready means the engine really serves.
    EXPECT_EQ(run(ioc, http_get_status("127.0.0.1", e->port(), "/health", 5s)), 200u);

    // -lv 4 makes this llama.cpp print its buffer sizes during load; the footprint is measured from them.
    std::string startup;
    for (const auto& l : e->startup_log()) startup += l + "\n";
    const auto fp = plan::parse_engine_log(startup);
    const auto measured = LlamaServerKind().measure(e->startup_log(), Placement{});
    ASSERT_TRUE(measured);
    EXPECT_EQ(measured->bytes, fp.device_total("cpu").bytes);
    ASSERT_TRUE(fp.any()) << "no buffer sizes in the startup log";
    const auto cpu = fp.device_total("cpu");
    EXPECT_GT(cpu.bytes, 0u);
    EXPECT_EQ(cpu.source, Source::measured);
    ASSERT_FALSE(fp.kv_caches.empty());
    EXPECT_EQ(fp.kv_caches[0].cells, 512u);

    const ExitReport stopped = run(ioc, e->stop());
    EXPECT_EQ(stopped.kind, ExitKind::stopped);
    std::cout << "ready after " << r.took.count() << " ms; cpu footprint " << cpu.bytes << " B ("
              << cpu.detail << "); stop: " << stopped.summary << "\n";
    EXPECT_TRUE(wait_gone(pid));
    EXPECT_TRUE(state.records().empty());
    const std::string log = read_file(e->log_file());
    EXPECT_THAT(log, HasSubstr("---- loch "));
    EXPECT_THAT(log, HasSubstr("KV buffer size"));
    EXPECT_FALSE(e->log_tail(5).empty());
}

TEST_F(LlamaServer, SegfaultIsClassifiedWithTheLogTail) {
    auto e = make_engine(model_->path());
    ASSERT_TRUE(run(ioc, e->start()).ready);
    std::optional<ExitReport> seen;
    e->on_exit([&](const ExitReport& r) { seen = r; });
    ::kill(*e->pid(), SIGSEGV);
    const ExitReport r = run(ioc, e->wait_exit());
    EXPECT_EQ(r.kind, ExitKind::signal);
    EXPECT_EQ(r.signal, SIGSEGV);
    EXPECT_THAT(r.summary, HasSubstr("exit 139 / SIGSEGV"));
    EXPECT_FALSE(r.log_tail.empty());
    ASSERT_TRUE(seen.has_value());
    EXPECT_EQ(e->state(), EngineState::failed);
}

TEST_F(LlamaServer, StartupTimeoutWhenTheEngineHangs) {
    const auto cfg = make_config(model_->path());
    auto spec = make_engine_spec(cfg, cfg.models.at(0));
    spec.startup_timeout = 2s;
    auto e = Engine::create(ioc.get_executor(), spec);
    // Freeze it at its first output line: a real engine that never becomes healthy.
    bool frozen = false;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            asio::steady_timer t(ioc);
            while (!frozen) {
                t.expires_after(1ms);
                co_await t.async_wait(asio::use_awaitable);
                if (e->pid() && !e->log_tail(1).empty()) {
                    ::kill(*e->pid(), SIGSTOP);
                    frozen = true;
                }
            }
        },
        asio::detached);
    const StartResult r = run(ioc, e->start());
    ASSERT_FALSE(r.ready);
    EXPECT_TRUE(frozen);
    EXPECT_EQ(r.failure->kind, ExitKind::startup_timeout);
    EXPECT_THAT(r.failure->summary, HasSubstr("startup timeout of 2 s"));
    EXPECT_GE(r.took, 2s);
    EXPECT_TRUE(wait_gone(*e->pid()));
}

TEST_F(LlamaServer, BadModelFileExitsWithTheEnginesOwnWords) {
    // GGUF magic (so the config accepts it) but a truncated header: the engine itself has to refuse it.
    const auto bad = dir / "broken.gguf";
    std::ofstream(bad, std::ios::binary) << "GGUF\x03\x00\x00\x00garbage";
    auto e = make_engine(bad);
    const StartResult r = run(ioc, e->start());
    ASSERT_FALSE(r.ready);
    EXPECT_EQ(r.failure->kind, ExitKind::exit_code) << r.failure->summary;
    EXPECT_EQ(r.failure->exit_code, 1);
    EXPECT_THAT(r.failure->summary, HasSubstr("exit 1: gguf_init_from_reader: failed to read header"));
    EXPECT_FALSE(r.failure->matched_line.empty());
    const auto& tail = r.failure->log_tail;
    EXPECT_TRUE(std::any_of(tail.begin(), tail.end(), [](const std::string& l) {
        return l.find("failed to load model") != std::string::npos;
    })) << ::testing::PrintToString(tail);
    EXPECT_LT(r.took, 60s);
    std::cout << "bad model: " << r.failure->summary << "\n";
}

TEST_F(LlamaServer, DiesWithItsParent) {
    const auto cfg = make_config(model_->path());
    const auto spec = make_engine_spec(cfg, cfg.models.at(0));
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        asio::io_context cioc;
        auto p = Process::spawn(cioc.get_executor(), SpawnSpec{spec.argv, {}, {}, {}, 10});
        const pid_t engine = p->pid();
        [[maybe_unused]] auto n = ::write(fds[1], &engine, sizeof engine);
        ::sleep(1);  // let it start loading
        ::_exit(0);  // loch "crashes": no destructor runs
    }
    pid_t engine = 0;
    ASSERT_EQ(::read(fds[0], &engine, sizeof engine), static_cast<ssize_t>(sizeof engine));
    ::close(fds[0]);
    ::close(fds[1]);
    int st = 0;
    ::waitpid(child, &st, 0);
    EXPECT_TRUE(wait_gone(engine)) << "llama-server " << engine << " survived its parent";
}

TEST_F(LlamaServer, StaleEngineOfACrashedLochIsCleanedUp) {
    // A llama-server whose loch died without PDEATHSIG reaching it (spawned here without one), recorded in
    // the state file the way loch records its engines.
    const auto cfg = make_config(model_->path());
    const auto spec = make_engine_spec(cfg, cfg.models.at(0));
    test::Process orphan(spec.argv[0], std::vector<std::string>(spec.argv.begin() + 1, spec.argv.end()),
                         dir / "orphan.log");
    const pid_t pid = orphan.pid();
    for (int i = 0; i < 100 && proc_cmdline(pid).value_or(std::vector<std::string>{}) != spec.argv; ++i)
        std::this_thread::sleep_for(10ms);
    EngineRecord rec{"tiny", pid, pid, proc_start_ticks(pid).value(), spec.argv, spec.port, 0};
    std::filesystem::create_directories(dir / "state");
    write_state(dir / "state" / "engines.json", StateSnapshot{999999, 1, {rec}});
    const auto res = cleanup_stale(dir / "state");
    ASSERT_EQ(res.killed.size(), 1u) << (res.skipped.empty() ? "" : res.skipped[0]);
    EXPECT_TRUE(orphan.wait_for(10s).has_value()) << "the stale llama-server is still running";
}

}  // namespace
}  // namespace loch::engines
