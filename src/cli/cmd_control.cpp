// `loch ps`, `loch status`, `loch logs MODEL [-f]`, `loch load MODEL`, `loch unload MODEL`, `loch run … --
// COMMAND` (cli/job_run.hpp), `loch cancel ID…`: talk to a running `loch serve` at --url, else at the address
// of the config (-c), else $LOCH_URL, else http://127.0.0.1:8080. The API key comes from --api-key,
// $LOCH_API_KEY or the config's first api_keys entry.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/client.hpp"
#include "cli/commands.hpp"
#include "cli/job_run.hpp"
#include "cli/tables.hpp"
#include "config/config.hpp"
#include "core/memory.hpp"
#include "engines/kind.hpp"

namespace loch::cli {

namespace {

struct ControlOptions {
    std::string url, config_file, api_key;
    bool json = false, all = false, follow = false;
    std::string model;
    std::size_t lines = 100;
    std::vector<std::string> ids;
};

ServerAddress address_of(const ControlOptions& o) {
    ServerAddress a;
    if (!o.config_file.empty()) {
        auto ctx = config::LoadContext::from_process();
        ctx.kinds = engines::kind_schemas();
        const auto cfg = config::load_config_file(o.config_file, ctx);
        a.host = cfg.listen == "0.0.0.0" ? "127.0.0.1" : cfg.listen;
        a.port = cfg.port;
        if (!cfg.api_keys.empty()) a.api_key = cfg.api_keys.front();
    }
    // Where: --url, else the config given (-c), else $LOCH_URL (a loch off the default address, set once for
    // every command), else the default.
    std::string url = o.url;
    if (url.empty() && o.config_file.empty())
        if (const char* u = std::getenv("LOCH_URL"); u && *u) url = u;
    if (!url.empty()) {
        const auto key = a.api_key;
        a = parse_url(url);
        a.api_key = key;
    }
    if (const char* k = std::getenv("LOCH_API_KEY"); k && *k) a.api_key = k;
    if (!o.api_key.empty()) a.api_key = o.api_key;
    return a;
}

// Model names go into a URL path: only the characters a model name may hold (config names are checked).
std::string path_part(const std::string& name) {
    std::string out;
    for (unsigned char c : name) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == ':')
            out += static_cast<char>(c);
        else
            out += fmt::format("%{:02X}", c);
    }
    return out;
}

CLI::App* with_common(CLI::App* cmd, const std::shared_ptr<ControlOptions>& o) {
    cmd->add_option(
        "--url", o->url,
        "the running loch (default: the config's address, else $LOCH_URL, else http://127.0.0.1:8080)");
    cmd->add_option("-c,--config", o->config_file, "loch.yaml to take the address and API key from");
    cmd->add_option("--api-key", o->api_key, "API key (default: $LOCH_API_KEY, else the config's first)");
    return cmd;
}

std::string model_line(const nlohmann::json& m) {
    std::string line = fmt::format("{}: {}", m.value("name", ""), m.value("state", ""));
    if (m.contains("device")) line += " on " + m["device"].get<std::string>();
    if (m.contains("reservation"))
        line += fmt::format(", {} ({})", human_bytes(m["reservation"].value("bytes", std::uint64_t{0})),
                            m["reservation"].value("source", ""));
    if (m.contains("load_s") && m.value("state", "") == "ready")
        line += fmt::format(", loaded in {:.1f} s", m["load_s"].get<double>());
    if (m.value("unload_pending", false)) line += " (stops when its requests end)";
    return line;
}

}  // namespace

void add_control_commands(CLI::App& app) {
    {
        auto o = std::make_shared<ControlOptions>();
        auto* cmd =
            with_common(app.add_subcommand("ps", "the running models of a loch serve, like `ollama ps`"), o);
        cmd->add_flag("-a,--all", o->all, "every configured model, stopped ones too");
        cmd->add_flag("--json", o->json, "the /loch/status JSON");
        cmd->callback([o] {
            const auto st = call_loch(address_of(*o), "GET", "/loch/status");
            std::cout << (o->json ? st.dump(2) + "\n" : ps_table(st, o->all));
        });
    }
    {
        auto o = std::make_shared<ControlOptions>();
        auto* cmd = with_common(
            app.add_subcommand("status", "devices, memory by holder and source, the queue, recent decisions"),
            o);
        cmd->add_flag("--json", o->json, "the /loch/status JSON");
        cmd->callback([o] {
            const auto st = call_loch(address_of(*o), "GET", "/loch/status");
            std::cout << (o->json ? st.dump(2) + "\n" : status_text(st) + "\n" + ps_table(st, true));
        });
    }
    {
        auto o = std::make_shared<ControlOptions>();
        auto* cmd =
            with_common(app.add_subcommand("logs", "an engine's log (its last lines; -f follows it)"), o);
        cmd->add_option("model", o->model, "model name")->required();
        cmd->add_flag("-f,--follow", o->follow, "keep printing new lines until interrupted");
        cmd->add_option("-n,--lines", o->lines, "how many of the last lines")->check(CLI::Range(1, 10000));
        cmd->callback([o] {
            const auto to = address_of(*o);
            const std::string base =
                "/loch/engines/" + path_part(o->model) + "/log?lines=" + std::to_string(o->lines);
            if (o->follow) {
                follow_loch(to, base + "&follow=1", [](const std::string& line) {
                    std::cout << line << "\n" << std::flush;
                });
                return;
            }
            const auto answer =
                call_loch(to, "GET", base);  // (a member of a temporary would dangle in the loop)
            for (const auto& l : answer["lines"]) std::cout << l.get<std::string>() << "\n";
        });
    }
    for (const bool load : {true, false}) {
        auto o = std::make_shared<ControlOptions>();
        auto* cmd =
            with_common(app.add_subcommand(load ? "load" : "unload",
                                           load ? "start a model now and wait until it is ready"
                                                : "stop a model (now, or when its running requests end)"),
                        o);
        cmd->add_option("model", o->model, "model name")->required();
        cmd->callback([o, load] {
            const auto m = call_loch(address_of(*o), "POST",
                                     "/loch/models/" + path_part(o->model) + (load ? "/load" : "/unload"),
                                     std::chrono::seconds(load ? 3600 : 30));
            std::cout << model_line(m) << "\n";
        });
    }
    {
        auto o = std::make_shared<ControlOptions>();
        auto* cmd = with_common(
            app.add_subcommand("cancel",
                               "cancel queued or running requests (by X-Request-Id, as `loch status` lists "
                               "them) or jobs' holds (hold-N: a `loch run` job is asked to stop)"),
            o);
        cmd->add_option("id", o->ids, "request ids or hold ids")->required();
        cmd->callback([o] {
            const auto to = address_of(*o);
            int failed = 0;
            for (const auto& id : o->ids) {
                const auto reply = exchange_loch(to, "DELETE", "/loch/requests/" + path_part(id), "");
                if (reply.status != 200 || !reply.json.is_object()) {
                    std::cerr << "loch cancel " << id << ": " << reply.message() << "\n";
                    ++failed;
                    continue;
                }
                for (const auto& c : reply.json.value("cancelled", nlohmann::json::array())) {
                    if (c.contains("hold"))
                        std::cout << fmt::format("cancelled {} (job '{}', was {})\n", id,
                                                 c["hold"].value("name", std::string()),
                                                 c["hold"].value("reason", std::string()));
                    else
                        std::cout << fmt::format("cancelled {} ({} for model '{}', {:.1f} s)\n", id,
                                                 c.value("state", std::string()),
                                                 c.value("model", std::string()), c.value("age_s", 0.0));
                }
                for (const auto& k : reply.json.value("not_cancellable", nlohmann::json::array()))
                    std::cout << fmt::format("not cancelled: {} runs on '{}', whose engine cannot stop it\n",
                                             id, k.value("model", std::string()));
            }
            std::exit(failed ? 1 : 0);
        });
    }
    {
        auto o = std::make_shared<ControlOptions>();
        auto r = std::make_shared<RunOptions>();
        auto wait_text = std::make_shared<std::string>(), ttl_text = std::make_shared<std::string>();
        auto* cmd = with_common(
            app.add_subcommand("run",
                               "run a command (a training run, a script) once loch grants it device memory"),
            o);
        auto* memory = cmd->add_option("--memory", r->memory, "device memory it needs (12GiB, 500MiB)");
        cmd->add_option("--like", r->like, "needs what this model needs")->excludes(memory);
        cmd->add_option("--device", r->device,
                        "auto (any GPU, else the CPU) or a device id from `loch devices`");
        cmd->add_option("--priority", r->priority, "interactive or batch")
            ->check(CLI::IsMember({"interactive", "batch"}));
        cmd->add_option("--wait", *wait_text,
                        "give up waiting after this long (30s, 10m; default: no limit)");
        cmd->add_option("--name", r->name, "its name in loch (default: the command's file name)");
        cmd->add_option(
            "--ttl", *ttl_text,
            "loch releases the hold of a job it cannot see run after this long without a heartbeat "
            "(default 30s; one is sent every third of it)");
        cmd->add_option("command", r->command, "-- COMMAND ARGS…")->required();
        cmd->callback([o, r, wait_text, ttl_text] {
            const auto duration = [](const char* flag, const std::string& text) {
                std::string why;
                const auto d = config::parse_duration(text, &why);
                if (!d) throw CLI::ValidationError(flag, "'" + text + "' is not a duration: " + why);
                return std::chrono::duration_cast<std::chrono::seconds>(*d);
            };
            if (!wait_text->empty()) r->wait = duration("--wait", *wait_text);
            if (!ttl_text->empty()) {
                r->ttl = duration("--ttl", *ttl_text);
                if (r->ttl.count() < 3) throw CLI::ValidationError("--ttl", "at least 3s");
            }
            const int code = run_job(address_of(*o), *r);
            std::fflush(stdout);
            std::exit(code);  // the command's own status (CLI11 would map every error to its own codes)
        });
    }
}

}  // namespace loch::cli
