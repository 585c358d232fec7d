// `loch serve` — the broker behind an OpenAI-compatible HTTP API. Loads the config (or the embedded
// default), cleans up engines a crashed loch left behind, then runs everything on one io_context until
// SIGINT/SIGTERM, when every engine is stopped before loch exits.
#include <sys/resource.h>
#include <algorithm>
#include <charconv>
#include <cstdlib>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>

#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "balancer/agent_server.hpp"
#include "broker/broker.hpp"
#include "cli/commands.hpp"
#include "cli/config_limits.hpp"
#include "cli/engine_binaries.hpp"
#include "config/config.hpp"
#include "core/off_loop.hpp"
#include "devices/probe.hpp"
#include "doctor/doctor.hpp"
#include "engines/engine.hpp"
#include "engines/kind.hpp"
#include "http/server.hpp"

namespace loch::cli {

namespace {

namespace asio = boost::asio;

struct ServeOptions {
    std::string config_file;
    std::string models_dir;
    std::string listen;
    int port = -1;
    std::string state_dir, log_dir;  // override the config's
    bool print_default = false;
    std::string log_level = "info";     // loch's own log; debug adds every successful request's line
    std::string sysroot = "/";          // a captured tree: plan for that machine (replays, tests)
    std::string bench_policy = "loch";  // the anchors' policies, for bench/mixed-trace only (broker.hpp)
};

// The platform traps `loch doctor` knows, checked once at start and logged with their fixes: a person who
// only reads loch's log learns that the firmware breaks ROCm before a job hangs. The environment judged is
// loch's own (the engines inherit it), also when the devices come from a captured tree.
void log_platform_findings(const config::Config& cfg, const std::string& sysroot) {
    auto options = devices::default_probe_options(sysroot, devices::process_environment());
    options.env = devices::process_environment();
    doctor::Input input;
    for (const auto& [id, dc] : cfg.devices)
        if (dc.backend) input.engines.push_back(*dc.backend);
    input.engine_builds = engine_binaries(cfg);
    options.probe_vulkan = options.probe_vulkan && uses_vulkan(cfg);
    options.software_vulkan = names_vulkan_device(cfg);
    for (const auto& f : doctor::diagnose(devices::probe(options), input)) {
        if (f.severity == doctor::Severity::info) continue;
        const auto line = fmt::format("doctor {}{}: {} Fix: {}", f.id,
                                      f.device.empty() ? "" : " (" + f.device + ")", f.explanation, f.fix);
        if (f.severity == doctor::Severity::error)
            spdlog::error("{}", line);
        else
            spdlog::warn("{}", line);
    }
}

// Each client connection holds a descriptor and each relay another to its engine: raise the soft limit to
// the hard one; when even that cannot hold max_connections twice over plus the engines' share, serve fewer
// connections (returned) and say so.
std::uint32_t raise_fd_limit(std::uint32_t max_connections) {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return max_connections;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    // Each client connection may hold an upstream one too; 256 stay for engines, their pipes, logs and
    // probes, so that a flood of clients can never starve the engine connections.
    constexpr rlim_t kReserved = 256;
    const rlim_t want = 2 * static_cast<rlim_t>(max_connections) + kReserved;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want) return max_connections;
    const auto fits =
        static_cast<std::uint32_t>(rl.rlim_cur > kReserved + 2 ? (rl.rlim_cur - kReserved) / 2 : 1);
    spdlog::warn(
        "open-file limit {} cannot hold max_connections {} ({} needed with the engines' share): serving at "
        "most {} connections; raise the hard limit (ulimit -Hn / LimitNOFILE=) or lower max_connections",
        static_cast<unsigned long long>(rl.rlim_cur), max_connections, static_cast<unsigned long long>(want),
        fits);
    return fits;
}

// The command line's values win over the file's, at start and at every reload.
void apply_overrides(config::Config& cfg, const ServeOptions& o) {
    if (!o.listen.empty()) {
        boost::system::error_code ec;
        const auto addr = asio::ip::make_address(o.listen, ec);
        if (ec) throw std::runtime_error("--listen '" + o.listen + "' is not an IP address");
        if (!addr.is_loopback() && cfg.api_keys.empty())
            throw std::runtime_error("--listen " + o.listen +
                                     " is reachable from other machines and the config has no api_keys: "
                                     "anyone who can reach it could use every model. Add api_keys, or "
                                     "listen on 127.0.0.1");
        cfg.listen = o.listen;
    }
    if (o.port >= 0) cfg.port = static_cast<std::uint16_t>(o.port);
    const auto absolute = [](const std::string& p) {
        return std::filesystem::absolute(p).lexically_normal();
    };
    if (!o.state_dir.empty()) {
        // The logs go with the state dir unless the config or --log-dir put them elsewhere: two lochs with
        // their own state dirs must not write the same requests.jsonl.
        if (cfg.log_dir == cfg.state_dir / "logs") cfg.log_dir = absolute(o.state_dir) / "logs";
        cfg.state_dir = absolute(o.state_dir);
    }
    if (!o.log_dir.empty()) cfg.log_dir = absolute(o.log_dir);
}

void run_serve(const ServeOptions& o) {
    if (o.print_default) {
        std::cout << config::embedded_default_yaml();
        return;
    }
    spdlog::set_level(spdlog::level::from_str(o.log_level));
    auto ctx = config::LoadContext::from_process();
    ctx.kinds = engines::kind_schemas();  // each engine kind parses its own keys
    config::Config cfg = o.config_file.empty() ? config::default_config(ctx, o.models_dir)
                                               : config::load_config_file(o.config_file, ctx);
    apply_overrides(cfg, o);
    for (const auto& n : cfg.notes) spdlog::info("config: {}", n);
    if (cfg.models.empty()) spdlog::warn("config {} names no model: nothing to serve", cfg.source);

    // One loch per state dir; engines of a crashed predecessor are killed (verified by PID start time).
    engines::StateFile state(cfg.state_dir);
    const auto cleaned = state.cleanup_stale();
    for (const auto& r : cleaned.killed)
        spdlog::warn("stopped a stale engine of a previous loch: model '{}' pid {}", r.model, r.pid);
    for (const auto& s : cleaned.skipped) spdlog::info("state file: {}", s);
    for (const auto& s : cleaned.descendants_killed)
        spdlog::warn("stopped processes forked by a stale engine of a previous loch: {}", s);

    cfg.max_connections = raise_fd_limit(cfg.max_connections);

    if (o.sysroot != "/")
        spdlog::warn(
            "devices, memory cgroup and platform read from the captured tree {}: loch plans for that "
            "machine while its engines run on this one",
            o.sysroot);
    log_platform_findings(cfg, o.sysroot);

    asio::io_context ioc(1);
    const auto ex = ioc.get_executor();
    const char* nvml = std::getenv("LOCH_NVML_LIBRARY");
    broker::Broker broker(ex, cfg,
                          std::make_unique<broker::ProbedDevices>(
                              nvml && *nvml ? nvml : (o.sysroot == "/" ? "libnvidia-ml.so.1" : ""), o.sysroot,
                              uses_vulkan(cfg), names_vulkan_device(cfg)),
                          std::make_unique<broker::KindFootprint>(cfg.state_dir / "dry-run-cache.json"),
                          std::make_unique<engines::ProcessLauncher>(&state),
                          broker::BrokerOptions{.policy = broker::policy_named(o.bench_policy)});
    if (o.bench_policy != "loch")
        spdlog::warn(
            "scheduling as the {} policy (--bench-policy): an anchor's policy for bench/mixed-trace, "
            "not loch's",
            o.bench_policy);
    http::ServerOptions so;
    so.listen = cfg.listen;
    so.port = cfg.port;
    so.api_keys = cfg.api_keys;
    so.max_body_bytes = cfg.max_body_bytes;
    for (const auto& m : cfg.models)
        if (const auto up = engines::kind_of(m).max_upload(m))
            so.max_upload_bytes = std::max(so.max_upload_bytes, *up);
    so.idle_timeout = cfg.client_timeouts.idle;
    so.header_timeout = cfg.client_timeouts.header;
    so.body_timeout = cfg.client_timeouts.body;
    so.max_connections = cfg.max_connections;
    std::filesystem::create_directories(cfg.log_dir);
    so.request_log = cfg.log_dir / "requests.jsonl";
    so.batch_dir = cfg.state_dir / "batches";
    so.max_batch_file_bytes = cfg.max_batch_file_bytes;
    so.batch_concurrency = cfg.batch_concurrency;
    so.responses_max_age = cfg.responses.max_age;
    so.responses_max_bytes = cfg.responses.max_bytes;
    http::Server server(ex, broker, so);
    const auto port = server.listen();
    std::optional<balancer::AgentServer> agent;
    if (cfg.agent) agent.emplace(ex, broker, *cfg.agent);
    const auto agent_port = agent ? agent->listen() : 0;
    broker.start();
    server.start();
    if (agent) agent->start();
    std::printf("loch: serving %zu model(s) on http://%s:%u (config: %s)\n", cfg.models.size(),
                cfg.listen.c_str(), static_cast<unsigned>(port), cfg.source.c_str());
    if (agent)
        std::printf("loch: HAProxy's agent-check on %s:%u\n", cfg.agent->listen.c_str(),
                    static_cast<unsigned>(agent_port));
    std::fflush(stdout);

    // SIGHUP: the config file is read again and, when it is valid, served from now on (Broker::reload: what
    // needs a new engine restarts once its requests end); a bad one is reported with file:line and the old
    // one keeps serving. Without this handler SIGHUP would end loch.
    // Reading the file checks every model file (GGUF headers, sizes): on a worker, never on the loop. One
    // reload at a time, in the order the signals came.
    asio::signal_set hangups(ioc, SIGHUP);
    asio::thread_pool reading(1);
    const auto reload = [&]() -> asio::awaitable<void> {
        std::optional<config::Config> fresh;
        try {
            fresh = co_await core::off_loop(reading, [&o, ctx] {
                auto next = config::load_config_file(o.config_file, ctx);
                apply_overrides(next, o);
                return next;
            });
        } catch (const std::exception& e) {
            spdlog::error("SIGHUP: the new config is not valid, loch keeps serving the old one: {}",
                          e.what());
            co_return;
        }
        if (fresh->listen != cfg.listen || fresh->port != cfg.port)
            spdlog::warn("SIGHUP: a new listen address or port takes a restart; still on {}:{}", cfg.listen,
                         cfg.port);
        server.set_api_keys(fresh->api_keys);
        const auto changes = co_await broker.reload(std::move(*fresh));
        spdlog::info("SIGHUP: now serving {} ({})", o.config_file, changes.dump());
    };
    const auto hangup_loop = [&]() -> asio::awaitable<void> {
        for (;;) {
            const auto [ec, sig] = co_await hangups.async_wait(asio::as_tuple(asio::use_awaitable));
            if (ec) co_return;
            if (o.config_file.empty())
                spdlog::info("SIGHUP: serving the embedded default; nothing to reload");
            else
                co_await reload();
        }
    };
    asio::co_spawn(ex, hangup_loop, asio::detached);
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        spdlog::info(
            "signal {}: running requests get {} s to finish, then every engine stops (idle ones save "
            "their conversations first); a second signal ends loch at once",
            sig, cfg.stop_grace.count());
        // A second signal while that runs (Ctrl-C twice): the person wants loch gone now. The engines'
        // groups are killed (nothing saved, nothing waited for: the next start cleans what is left) and
        // loch exits as a signal would have ended it.
        signals.async_wait([&](const boost::system::error_code& again, int sig2) {
            if (again) return;
            const auto killed = broker.control().kill_engines_now();
            spdlog::warn("signal {} again: exiting now, {} engine(s) killed", sig2, killed);
            spdlog::default_logger()->flush();
            std::_Exit(128 + sig2);
        });
        asio::co_spawn(
            ex,
            [&]() -> asio::awaitable<void> {
                if (agent) agent->drain();  // balancers send nothing new here from their next check
                co_await server.drain(cfg.stop_grace);
                co_await broker.shutdown();
                co_await server.wait_closed();
                if (agent) agent->stop();
                hangups.cancel();
                ioc.stop();
            },
            asio::detached);
    });
    ioc.run();
}

}  // namespace

void add_serve_command(CLI::App& app) {
    auto o = std::make_shared<ServeOptions>();
    auto* cmd = app.add_subcommand("serve", "serve models over an OpenAI-compatible HTTP API (the broker)");
    cmd->add_option("-c,--config", o->config_file,
                    "loch.yaml (default: the embedded default over --models-dir)");
    cmd->add_option("--models-dir,--models", o->models_dir,
                    "models folder for the embedded default (default ./models)");
    cmd->add_option("--state-dir", o->state_dir,
                    "state folder (overrides the config): engine records, the lock");
    cmd->add_option("--log-dir", o->log_dir, "engine log folder (overrides the config)");
    cmd->add_option("--listen", o->listen, "listen address (overrides the config; default 127.0.0.1)");
    cmd->add_option("--port", o->port, "port (overrides the config; 0 = any free port)")
        ->check(CLI::Validator(
            [](std::string& v) {
                int p = -1;
                const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), p);
                if (ec != std::errc() || end != v.data() + v.size() || p < 0 || p > 65535)
                    return "'" + v + "' is not a port: a number 0-65535 (0 = any free port)";
                return std::string();
            },
            "PORT"));
    cmd->add_option("--log-level", o->log_level,
                    "loch's own log: debug adds a line for every request that succeeded (the request log "
                    "has them all)")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
    cmd->add_option(
           "--sysroot", o->sysroot,
           "plan for the machine captured under DIR (its /proc, /sys, cgroup, vulkan.json) while the "
           "engines run here: replays of another machine's traps (docs/strix-halo.md)")
        ->check(CLI::ExistingDirectory);
    cmd->add_option(
           "--bench-policy", o->bench_policy,
           "for bench/mixed-trace only: schedule as llama-swap (fifo-lock) or Ollama (keepalive-lru) "
           "would, to compare loch with them on the same engines")
        ->check(CLI::IsMember({"loch", "fifo-lock", "keepalive-lru"}));
    cmd->add_flag("--print-default-config", o->print_default, "print the embedded default config and exit");
    cmd->callback([o] { run_serve(*o); });
}

}  // namespace loch::cli
