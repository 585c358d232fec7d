// Engine: spawn → health polling → ready; stop (TERM → grace → KILL); exit report; state-file record.
#include "engines/engine.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <nlohmann/json.hpp>

#include "core/http_client.hpp"
#include "engines/process.hpp"

namespace loch::engines {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {
// T: stopped by a signal (SIGSTOP, SIGTSTP); t: stopped by a tracer.
bool is_stopped(std::optional<char> state) {
    return state && (*state == 'T' || *state == 't');
}
}  // namespace

std::string_view to_string(EngineState s) {
    switch (s) {
        case EngineState::created:
            return "created";
        case EngineState::starting:
            return "starting";
        case EngineState::ready:
            return "ready";
        case EngineState::stopping:
            return "stopping";
        case EngineState::stopped:
            return "stopped";
        case EngineState::failed:
            return "failed";
    }
    return "unknown";
}

asio::awaitable<unsigned> http_get_status(std::string host, std::uint16_t port, std::string path,
                                          std::chrono::milliseconds timeout) {
    core::HttpCall call;
    call.target = path;
    call.timeout = timeout;
    call.body_limit = 1 << 20;
    call.connect_only =
        path.empty();  // no health path: a server that accepts the connection counts as answering
    const auto r = co_await core::http_exchange(co_await asio::this_coro::executor, {std::move(host), port},
                                                std::move(call));
    co_return static_cast<unsigned>(r.status);
}

std::shared_ptr<EngineRun> ProcessLauncher::launch(asio::any_io_executor ex, EngineSpec spec) {
    return Engine::create(std::move(ex), std::move(spec), state_);
}

struct Engine::Private {};

Engine::Engine(Private, asio::any_io_executor ex, EngineSpec spec, StateFile* state)
    : ex_(std::move(ex)), spec_(std::move(spec)), state_file_(state) {}

std::shared_ptr<Engine> Engine::create(asio::any_io_executor ex, EngineSpec spec, StateFile* state) {
    auto e = std::make_shared<Engine>(Private{}, std::move(ex), std::move(spec), state);
    e->weak_self_ = e;
    return e;
}

Engine::~Engine() {
    if (proc_ && state_file_ != nullptr) {
        try {
            state_file_->remove(proc_->pid());
        } catch (const std::exception&) {
            // The destructor must not throw; a stale record is verified before any kill anyway.
        }
    }
    // proc_'s destructor SIGKILLs the group if it still runs, and reaps it.
}

std::optional<pid_t> Engine::pid() const {
    if (!proc_) return std::nullopt;
    return proc_->pid();
}

std::vector<std::string> Engine::log_tail(std::size_t n) const {
    if (!proc_) return {};
    return proc_->output_tail(n);
}

void Engine::on_exit(std::function<void(const ExitReport&)> cb) {
    on_exit_ = std::move(cb);
}

void Engine::finish(int wait_status) {
    if (exit_) return;
    ExitFacts facts{wait_status, stop_requested_, startup_timed_out_, hung_};
    const auto lines = proc_->output_tail(spec_.ring_lines);
    exit_ = classify_exit(facts, lines);
    explain_kill(*exit_);
    if (startup_timed_out_) {
        exit_->summary = "not ready within the startup timeout of " +
                         std::to_string(spec_.startup_timeout.count()) + " s (GET " + spec_.health_path +
                         " never answered 200); loch killed it";
    }
    state_ =
        stop_requested_ && !startup_timed_out_ && hung_.empty() ? EngineState::stopped : EngineState::failed;
    if (state_file_ != nullptr) {
        try {
            state_file_->remove(proc_->pid());
        } catch (const std::exception&) {
        }
    }
    if (on_exit_) {
        auto cb = on_exit_;  // the callback may drop the last reference to this engine's owner
        cb(*exit_);
    }
}

asio::awaitable<void> Engine::watch_exit(std::weak_ptr<Engine> weak) {
    Process* raw = nullptr;
    {
        auto self = weak.lock();
        if (!self || !self->proc_) co_return;
        raw = self->proc_.get();
    }
    // Process::async_wait touches only its shared state after resuming: safe even if the Engine is gone.
    auto wait = raw->async_wait();
    const int status = co_await std::move(wait);
    if (auto self = weak.lock()) self->finish(status);
}

asio::awaitable<StartResult> Engine::start() {
    auto self = weak_self_.lock();  // keep alive for the duration of the start
    StartResult res;
    if (state_ != EngineState::created) {
        res.failure = exit_ ? *exit_ : ExitReport{};
        if (!exit_) {
            res.failure->kind = ExitKind::spawn_failed;
            res.failure->summary = "start() called twice on one engine";
        }
        co_return res;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto took = [&] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    };
    state_ = EngineState::starting;
    started_at_ = std::chrono::system_clock::now();

    SpawnSpec ss;
    ss.argv = spec_.argv;
    ss.env_add = spec_.env;
    ss.log_file = spec_.log_file;
    ss.ring_lines = spec_.ring_lines;
    try {
        proc_ = Process::spawn(ex_, ss);
    } catch (const std::exception& e) {  // SpawnError (exec failed, no port) and anything else
        ExitReport r;
        r.kind = ExitKind::spawn_failed;
        r.summary = std::string("could not start the engine: ") + e.what();
        exit_ = r;
        state_ = EngineState::failed;
        res.took = took();
        res.failure = r;
        if (on_exit_) on_exit_(r);
        co_return res;
    }
    if (state_file_ != nullptr) {
        EngineRecord rec;
        rec.model = spec_.model_name;
        rec.pid = proc_->pid();
        rec.pgid = proc_->pgid();
        rec.start_ticks = proc_->start_ticks();
        rec.argv = spec_.argv;
        rec.port = spec_.port;
        rec.tag = proc_->tag();
        rec.started_unix =
            std::chrono::duration_cast<std::chrono::seconds>(started_at_.time_since_epoch()).count();
        try {
            state_file_->add(rec);
        } catch (const std::exception&) {
            // Not fatal: PDEATHSIG still covers a crash of loch; the record only helps after SIGKILL of loch.
        }
    }
    asio::co_spawn(ex_, watch_exit(weak_self_), asio::detached);

    const auto deadline = t0 + spec_.startup_timeout;
    // Every ms between the engine's readiness and loch's next poll is added to a cold start (issue 9: ≤ 5
    // ms). A small model is ready in tens of ms: poll every 2 ms for the first 300 ms (a refused connect
    // costs microseconds). A large one takes seconds to minutes, and says in its log when it is ready
    // (llama-server: "server is listening"): loch wakes on each write to the log and polls then, every 2 ms
    // while the engine writes (its last lines come just before it answers), and otherwise backs off to 50 ms.
    // (Doubling from 5 ms made the 19 ms engine wait until 35; backing off to 250 ms without the log wake
    // added ~125 ms to every cold start over 300 ms.)
    // The log is watched only after the first 300 ms: until then loch polls every 2 ms anyway, and a wake
    // per log line (hundreds at -lv 4 within a small model's ~20 ms load) takes CPU from the engine on a
    // small box.
    auto interval = 2ms;
    auto last_write = t0;
    std::optional<std::chrono::steady_clock::time_point> stopped_since;
    unsigned last_status = 0;  // the last health poll's answer (0: none)
    while (true) {
        if (proc_->exited() || stop_requested_) break;
        const auto now = std::chrono::steady_clock::now();
        if (now - t0 > 300ms) proc_->watch_output();  // (once: it returns at once when already watching)
        if (now >= deadline) {
            startup_timed_out_ = true;
            proc_->signal_group(SIGKILL);
            break;
        }
        // A load may take an hour (startup_timeout), but a process stopped by a signal (SIGSTOP, a debugger)
        // is not loading: after the hang limit it is killed as hung instead of holding its memory and every
        // request for its model until the startup timeout. (Looked at only after a poll that got no HTTP
        // answer: a stopped process never answers, and a loading one that does costs no /proc read per poll.)
        if (last_status == 0 && is_stopped(proc_state(proc_->pid()))) {
            if (!stopped_since) stopped_since = now;
            if (spec_.hang_after.count() > 0 && now - *stopped_since >= spec_.hang_after) {
                kill_hung(fmt::format(
                    "stopped by a signal (process state T) while loading, for {} s",
                    std::chrono::duration_cast<std::chrono::seconds>(now - *stopped_since).count()));
                break;
            }
        } else {
            stopped_since.reset();
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
        const unsigned status = co_await http_get_status(spec_.host, spec_.port, spec_.health_path,
                                                         std::min<std::chrono::milliseconds>(2s, left));
        last_status = status;
        if (status == 200 && !proc_->exited() && !stop_requested_) {
            proc_->stop_watching_output();
            state_ = EngineState::ready;
            load_time_ = took();
            startup_log_ = proc_->output_tail(kStartupLogLines);
            res.ready = true;
            res.took = *load_time_;
            if (spec_.hang_after.count() > 0) asio::co_spawn(ex_, watch_health(weak_self_), asio::detached);
            co_return res;
        }
        // 503 = llama-server still loading; no answer = not listening yet. Wake early if the process ends or
        // writes; never poll more often than every 2 ms.
        const auto polled = std::chrono::steady_clock::now();
        const auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - polled);
        if (rest.count() > 0 &&
            co_await proc_->async_wait_output_for(std::min<std::chrono::milliseconds>(interval, rest)))
            last_write = std::chrono::steady_clock::now();
        if (const auto since = std::chrono::steady_clock::now() - polled; since < 2ms && !proc_->exited())
            co_await proc_->async_wait_for(
                std::chrono::duration_cast<std::chrono::milliseconds>(2ms - since));
        const auto now_after = std::chrono::steady_clock::now();
        if (now_after - t0 <= 300ms || now_after - last_write <= 20ms)
            interval = 2ms;
        else
            interval = std::min<std::chrono::milliseconds>(std::max(interval * 2, 10ms), 50ms);
    }
    proc_->stop_watching_output();
    const int status = co_await proc_->async_wait();
    finish(status);
    res.took = took();
    res.failure = exit_;
    co_return res;
}

asio::awaitable<ExitReport> Engine::stop() {
    auto self = weak_self_.lock();
    if (exit_) co_return *exit_;
    if (!proc_) {
        ExitReport r;
        r.kind = ExitKind::stopped;
        r.summary = "never started";
        exit_ = r;
        state_ = EngineState::stopped;
        co_return r;
    }
    stop_requested_ = true;
    state_ = EngineState::stopping;
    proc_->signal_group(SIGTERM);
    const std::chrono::milliseconds grace = spec_.stop_grace;
    if (!co_await proc_->async_wait_for(grace)) {
        proc_->signal_group(SIGKILL);
    }
    const int status = co_await proc_->async_wait();
    finish(status);
    co_return *exit_;
}

void Engine::kill_hung(std::string why) {
    if (exit_ || !proc_ || !hung_.empty()) return;
    hung_ = std::move(why);
    proc_->signal_group(SIGKILL);  // a stopped (SIGSTOP) process ignores SIGTERM until continued
}

asio::awaitable<void> Engine::watch_health(std::weak_ptr<Engine> weak) {
    // Holds the Engine only between polls: dropping the last reference must still kill the process at once.
    std::string host, path;
    std::uint16_t port = 0;
    std::chrono::milliseconds hang_after{0};
    asio::any_io_executor ex;
    {
        auto self = weak.lock();
        if (!self) co_return;
        host = self->spec_.host;
        path = self->spec_.health_path;
        port = self->spec_.port;
        hang_after = self->spec_.hang_after;
        ex = self->ex_;
    }
    // An idle loch costs next to nothing (issue 55): a check every 30 s at most; a hang is still found within
    // hang_after plus one period.
    const auto period = std::clamp<std::chrono::milliseconds>(hang_after / 4, 250ms, 30000ms);
    asio::steady_timer timer(ex);
    auto last_answer = std::chrono::steady_clock::now();
    for (;;) {
        timer.expires_after(period);
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (auto self = weak.lock(); !self || self->state_ != EngineState::ready) co_return;
        // Any HTTP answer shows the server loop is alive; only silence counts as hung.
        const unsigned status = co_await http_get_status(host, port, path, hang_after);
        auto self = weak.lock();
        if (!self || self->state_ != EngineState::ready) co_return;
        const auto now = std::chrono::steady_clock::now();
        if (status != 0) {
            last_answer = now;
            continue;
        }
        if (now - last_answer >= hang_after) {
            self->kill_hung(
                fmt::format("GET {} did not answer for {} s", path,
                            std::chrono::duration_cast<std::chrono::seconds>(now - last_answer).count()));
            co_return;
        }
    }
}

asio::awaitable<ExitReport> Engine::wait_exit() {
    auto self = weak_self_.lock();
    if (!exit_ && proc_) {
        const int status = co_await proc_->async_wait();
        finish(status);
    }
    if (!exit_) {
        ExitReport r;
        r.kind = ExitKind::stopped;
        r.summary = "never started";
        co_return r;
    }
    co_return *exit_;
}

nlohmann::json Engine::status_json() const {
    using nlohmann::json;
    json j{
        {"model", spec_.model_name},
        {"engine", spec_.kind},
        {"state", to_string(state_)},
        {"host", spec_.host},
        {"port", spec_.port},
        {"pid", proc_ ? json(proc_->pid()) : json(nullptr)},
        {"started_at_unix",
         proc_
             ? json(std::chrono::duration_cast<std::chrono::seconds>(started_at_.time_since_epoch()).count())
             : json(nullptr)},
        {"load_ms", load_time_ ? json(load_time_->count()) : json(nullptr)},
        {"log_file", spec_.log_file.string()},
        {"argv", spec_.argv},
        {"exit", exit_ ? json(*exit_) : json(nullptr)}};
    return j;
}

}  // namespace loch::engines
