// mixed-trace: what scheduling earns when models share a device (issues 33, 54; docs/performance.md). Three
// seeded traces, held constant (issue 54), each on a device budget that holds all but one of its models:
//
//   mixed        a person chatting (Poisson arrivals, streamed), an image every ~20 s, and a captioning-like
//                batch (many short items at batch priority, workers that always have one waiting);
//   two-people   two people, each chatting with a model of their own (Poisson, streamed), and the batch on
//                a third: two of the three fit, so every policy must swap;
//   image-burst  bursts of images queued at batch priority (a batch of pictures) beside a person in one
//                long conversation (a long first message, then turns that grow it): the chat model and the
//                image model do not fit together, so the conversation must survive evictions.
//
// run against `loch serve` under three policies on the same engines:
//
//   loch           loch's broker as it ships;
//   fifo-lock      llama-swap's default: one model at a time, one queue in arrival order, no priorities;
//   keepalive-lru  Ollama's: no priorities, models kept by keep_alive, idle ones evicted when one does not
//   fit.
//
// (The anchors' policies are modes of loch's broker built for this bench: `loch serve --bench-policy`.)
// Rounds interleave the policies (this box's speed drifts over minutes). Per policy: the person's time to
// first token p50/p95 (loch's request log, from arrival), batch items per minute, image latency, swaps
// (engine starts), out-of-memory exits, and the share of the window no request ran on the device; then
// loch's ratios to both anchors. Goals (issue 33): interactive p95 ≥ 3× better than fifo-lock, batch
// throughput ≥ 0.9× of it, no OOM.
//
//   mixed-trace --loch build/bin/loch [--trace mixed|two-people|image-burst] [--seconds 60] [--rounds 2]
//               [--seed 7] [--json OUT] [--device nvidia:0]
// Exit status 0 when it ran (goals are reported, not enforced: a bench, not a test); 2 when loch's own
// policy failed a request or answered no chat (the CI smoke, scripts/test.sh, runs 15 s per policy).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/engine_process.hpp"
#include "support/http_client.hpp"
#include "support/process.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    std::string loch, work = "/tmp/loch-mixed-trace", json_out, device = "cpu";
    // The person's chat model and the batch's captioner: small llamas a 2-core CPU runs at a useful speed.
    std::string chat =
        "--arch llama --layers 4 --embd 512 --heads 8 --ff 1408 --vocab 32000 --ctx 4096 "
        "--weights zeros";
    std::string captioner =
        "--arch llama --layers 12 --embd 1024 --heads 16 --ff 2816 --vocab 32000 "
        "--ctx 4096 --weights zeros";
    std::string trace = "mixed";
    double seconds = 60, chat_gap_s = 4, image_every_s = 20, burst_every_s = 30;
    int rounds = 2, chat_tokens = 16, item_tokens = 24, workers = 2, image_side = 128, threads = 2;
    int burst_images = 3, context_words = 600;  // image-burst: images per burst, the conversation's opening
    unsigned seed = 7;
    std::vector<std::string> policies = {"loch", "fifo-lock", "keepalive-lru"};
};

std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> out;
    std::string w;
    for (char c : s + " ")
        if (c == ' ') {
            if (!w.empty()) out.push_back(std::move(w));
            w.clear();
        } else {
            w += c;
        }
    return out;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * double(v.size() - 1) + 0.5))];
}

// One request as the bench saw it: when it was sent and answered (seconds from the window's start), and
// what loch's request log says (queue wait, time to first token).
struct Done {
    std::string id, kind;  // chat | image | item
    double sent = 0, answered = 0;
    int status = 0;
};

struct Figures {
    std::vector<double> chat_ttft, image_s;
    double items = 0, window = 0, busy = 0;
    std::uint64_t swaps = 0, ooms = 0, errors = 0;
};

class Bench {
  public:
    explicit Bench(Options o) : o_(std::move(o)) {}

    int run() {
        fs::create_directories(o_.work);
        bin_ = fs::absolute(o_.loch).parent_path();
        if (o_.trace != "mixed" && o_.trace != "two-people" && o_.trace != "image-burst")
            return fail("--trace is mixed, two-people or image-burst, not '" + o_.trace + "'");
        const auto& names = models();
        if (!synth("chat.gguf", words(o_.chat)) || (has("chat2") && !synth("chat2.gguf", words(o_.chat))) ||
            (has("captioner") && !synth("captioner.gguf", words(o_.captioner))) ||
            (has("image") && (!synth("flux.gguf", {"--diffusion", "flux-tiny"}) ||
                              !synth("clip-l.gguf", {"--diffusion", "clip-l", "--type", "q8_0"}) ||
                              !synth("taef1.gguf", {"--diffusion", "taef1"}))))
            return fail("loch-synth failed: see " + o_.work + "/synth.log");
        // The budget: all of the trace's models but one, never all (their reservations as loch plans them):
        // the total less half the smallest.
        const auto sizes = planned();
        if (sizes.size() != names.size())
            return fail("could not plan the trace's models: see " + o_.work + "/plan.log");
        std::uint64_t total = 0, least = UINT64_MAX;
        std::string planned_text;
        for (const auto& m : names) {
            total += sizes.at(m), least = std::min(least, sizes.at(m));
            planned_text += fmt::format("{}{} {:.0f}", planned_text.empty() ? "" : ", ", m,
                                        double(sizes.at(m)) / 1048576);
        }
        budget_ = total - least / 2;
        std::printf(
            "mixed-trace: trace %s, %.0f s per policy and round, %d round(s), seed %u, on %s; budget %.0f "
            "MiB (%s MiB planned: all but one fit)\n",
            o_.trace.c_str(), o_.seconds, o_.rounds, o_.seed, o_.device.c_str(), double(budget_) / 1048576,
            planned_text.c_str());
        if (o_.trace == "mixed")
            std::printf(
                "  a person chats every %.1f s on average (%d tokens, streamed), an image (%dx%d) every "
                "~%.0f "
                "s, %d batch workers (items of %d tokens, batch priority)\n",
                o_.chat_gap_s, o_.chat_tokens, o_.image_side, o_.image_side, o_.image_every_s, o_.workers,
                o_.item_tokens);
        else if (o_.trace == "two-people")
            std::printf(
                "  two people chat every %.1f s on average each, one with chat, one with chat2 (%d tokens, "
                "streamed); %d batch workers on the captioner (items of %d tokens, batch priority)\n",
                o_.chat_gap_s, o_.chat_tokens, o_.workers, o_.item_tokens);
        else
            std::printf(
                "  a burst of %d images (%dx%d, batch priority) every ~%.0f s; a person in one conversation "
                "(opened with %d words, a turn every %.1f s on average, %d tokens, streamed)\n",
                o_.burst_images, o_.image_side, o_.image_side, o_.burst_every_s, o_.context_words,
                o_.chat_gap_s, o_.chat_tokens);
        std::map<std::string, Figures> all;
        for (int round = 0; round < o_.rounds; ++round)
            for (const auto& p : o_.policies) {
                const auto f = run_policy(p, round);
                auto& a = all[p];
                a.chat_ttft.insert(a.chat_ttft.end(), f.chat_ttft.begin(), f.chat_ttft.end());
                a.image_s.insert(a.image_s.end(), f.image_s.begin(), f.image_s.end());
                a.items += f.items, a.window += f.window, a.busy += f.busy;
                a.swaps += f.swaps, a.ooms += f.ooms, a.errors += f.errors;
                std::printf("  round %d %-14s chat p95 %.3f s, %.1f items/min, %llu swaps\n", round + 1,
                            p.c_str(), percentile(f.chat_ttft, 0.95), 60 * f.items / f.window,
                            static_cast<unsigned long long>(f.swaps));
            }
        report(all);
        // A smoke run (CI) fails when loch's own policy lost a request or answered no person at all.
        if (all.contains("loch") && (all.at("loch").errors > 0 || all.at("loch").chat_ttft.empty())) {
            std::fprintf(
                stderr, "mixed-trace: loch's policy had %llu failed request(s), %zu chats answered\n",
                static_cast<unsigned long long>(all.at("loch").errors), all.at("loch").chat_ttft.size());
            return 2;
        }
        return 0;
    }

  private:
    int fail(const std::string& why) {
        std::fprintf(stderr, "mixed-trace: %s\n", why.c_str());
        return 1;
    }

    bool synth(const std::string& file, std::vector<std::string> args) {
        const auto out = fs::path(o_.work) / file;
        if (fs::exists(out)) return true;
        args.insert(args.end(), {"--out", out.string()});
        return loch::test::run_to_completion(bin_ / "loch-synth", args, fs::path(o_.work) / "synth.log",
                                             600s) == 0;
    }

    // The trace's models, as named in loch's config.
    const std::vector<std::string>& models() const {
        static const std::vector<std::string> mixed{"chat", "captioner", "image"},
            two_people{"chat", "chat2", "captioner"}, image_burst{"chat", "image"};
        return o_.trace == "two-people" ? two_people : o_.trace == "image-burst" ? image_burst : mixed;
    }

    bool has(const std::string& model) const {
        const auto& names = models();
        return std::find(names.begin(), names.end(), model) != names.end();
    }

    std::string config(const std::string& policy, std::uint64_t budget) const {
        const fs::path w = o_.work;
        const std::string devices = o_.device == "cpu" ? "" : fmt::format(", devices: [{}]", o_.device);
        // Ollama's default keep_alive is 5 minutes; loch's and llama-swap's keep a model until evicted.
        const std::string keep = policy == "keepalive-lru" ? ", keep_alive: 5m" : "";
        std::string yaml = fmt::format(
            "listen: 127.0.0.1\nstate_dir: {}\nengine_dir: {}\nqueue: {{interactive: 4096, batch: 4096}}\n"
            "devices:\n  {}: {{budget: {}}}\nmodels:\n",
            (w / ("state-" + policy)).string(), bin_.string(), o_.device, budget);
        // image-burst's conversation is long: each of the chat's two slots holds the whole training context.
        const int chat_ctx = o_.trace == "image-burst" ? 8192 : 4096;
        for (const auto& m : models()) {
            if (m == "image")
                yaml += fmt::format(
                    "  - {{name: image, engine: sd-server, path: {}, sd: {{clip_l: {}, taesd: {}, steps: 2, "
                    "threads: {}, max_size: {}x{}}}{}{}}}\n",
                    (w / "flux.gguf").string(), (w / "clip-l.gguf").string(), (w / "taef1.gguf").string(),
                    o_.threads, std::max(512, o_.image_side), std::max(512, o_.image_side), devices, keep);
            else
                yaml += fmt::format(
                    "  - {{name: {}, path: {}{}, args: {{ctx: {}, parallel: 2, threads: {}}}{}{}}}\n", m,
                    (w / (m + ".gguf")).string(), m == "captioner" ? ", priority: batch" : "",
                    m == "captioner" ? 4096 : chat_ctx, o_.threads, devices, keep);
        }
        return yaml;
    }

    std::unique_ptr<loch::test::Process> start(const std::string& policy, std::uint64_t budget) {
        port_ = loch::test::free_port();
        const auto cfg = fs::path(o_.work) / ("loch-" + policy + ".yaml");
        fs::remove_all(fs::path(o_.work) / ("state-" + policy));
        std::ofstream(cfg) << config(policy, budget);
        auto p = std::make_unique<loch::test::Process>(
            bin_ / "loch",
            std::vector<std::string>{"serve", "--config", cfg.string(), "--port", std::to_string(port_),
                                     "--bench-policy", policy},
            fs::path(o_.work) / ("loch-" + policy + ".log"));
        return loch::test::wait_until_ok(port_, "/health", 60s) ? std::move(p) : nullptr;
    }

    // Each model's reservation as loch plans it (POST /loch/plan), with room for all three.
    std::map<std::string, std::uint64_t> planned() {
        std::map<std::string, std::uint64_t> out;
        auto loch = start("loch", std::uint64_t{1} << 40);
        if (!loch) return out;
        std::ofstream log(fs::path(o_.work) / "plan.log");
        for (const auto& m : models()) {
            const auto r = loch::test::http_post_json(port_, "/loch/plan", json{{"model", m}}.dump(), 300s);
            log << r.body << "\n";
            const auto j = json::parse(r.body, nullptr, false);
            if (!j.is_object() || !j.contains("status") || !j["status"].contains("footprint")) continue;
            for (const auto& n : j["status"]["footprint"].value("needs", json::array()))
                if (n.value("device", "") == o_.device) out[m] = n.value("bytes", std::uint64_t{0});
        }
        loch->stop(30s);
        return out;
    }

    std::string chat_body(const std::string& model, int i) const {
        return json{
            {"model", model},
            {"stream", true},
            {"max_tokens", o_.chat_tokens},
            {"ignore_eos", true},
            {"messages", json::array({{{"role", "user"}, {"content", fmt::format("Question {}?", i)}}})}}
            .dump();
    }

    // image-burst's person: one conversation, its opening long (a document pasted in), then turn after turn
    // (the bench's own stand-ins for the answers: the same prefix every time, as a client resends it).
    std::string conversation_body(int turn) const {
        std::string opening = "Please keep this report in mind:";
        for (int k = 0; k < o_.context_words; ++k) opening += fmt::format(" w{}", k % 997);
        json messages = json::array({{{"role", "user"}, {"content", opening}}});
        for (int t = 0; t < turn; ++t) {
            messages.push_back({{"role", "assistant"}, {"content", fmt::format("Noted, part {}.", t)}});
            messages.push_back({{"role", "user"}, {"content", fmt::format("And part {}?", t + 1)}});
        }
        return json{{"model", "chat"},
                    {"stream", true},
                    {"max_tokens", o_.chat_tokens},
                    {"ignore_eos", true},
                    {"messages", messages}}
            .dump();
    }

    std::string image_body(int i) const {
        return json{{"model", "image"},
                    {"prompt", fmt::format("a lighthouse, take {}", i)},
                    {"size", fmt::format("{}x{}", o_.image_side, o_.image_side)},
                    {"response_format", "b64_json"}}
            .dump();
    }

    Figures run_policy(const std::string& policy, int round) {
        Figures f;
        auto loch = start(policy, budget_);
        if (!loch) {
            std::fprintf(stderr, "mixed-trace: loch serve (%s) did not come up\n", policy.c_str());
            f.errors = 1;
            return f;
        }
        // The same seeded arrivals for every policy in this round.
        std::mt19937 rng(o_.seed + unsigned(round));
        std::exponential_distribution<double> gap(1.0 / o_.chat_gap_s);
        std::uniform_real_distribution<double> jitter(0.75, 1.25);
        // (second, what): "chat:<model>" a person's question, "turn" the next turn of image-burst's
        // conversation, "image" one picture for a person, "burst" a batch of pictures.
        std::vector<std::pair<double, std::string>> arrivals;
        const auto poisson = [&](const std::string& what) {
            for (double t = gap(rng); t < o_.seconds; t += gap(rng)) arrivals.emplace_back(t, what);
        };
        const auto every = [&](double mean_gap, const std::string& what) {
            for (double t = mean_gap * jitter(rng) / 2; t < o_.seconds; t += mean_gap * jitter(rng))
                arrivals.emplace_back(t, what);
        };
        if (o_.trace == "mixed") {
            poisson("chat:chat");
            every(o_.image_every_s, "image");
        } else if (o_.trace == "two-people") {
            poisson("chat:chat");
            poisson("chat:chat2");
        } else {
            poisson("turn");
            every(o_.burst_every_s, "burst");
        }
        std::sort(arrivals.begin(), arrivals.end());
        const int batch_workers = has("captioner") ? o_.workers : 0;

        std::mutex mu;
        std::vector<Done> done;
        const auto t0 = Clock::now();
        const auto now_s = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
        const auto send = [&](std::string kind, std::string id, std::string target, std::string body,
                              bool batch) {
            Done d{id, kind, now_s(), 0, 0};
            loch::test::HttpRequest r;
            r.method = boost::beast::http::verb::post;
            r.port = port_;
            r.target = std::move(target);
            r.body = std::move(body);
            r.content_type = "application/json";
            r.headers["X-Request-Id"] = id;
            if (batch) r.headers["X-Loch-Priority"] = "batch";
            r.timeout = 600s;
            try {
                d.status = loch::test::http_request(r).status;
            } catch (const std::exception&) {
                d.status = 0;
            }
            d.answered = now_s();
            std::lock_guard lock(mu);
            done.push_back(std::move(d));
        };
        std::vector<std::thread> workers;
        std::atomic<bool> stop{false};
        for (int w = 0; w < batch_workers; ++w)
            workers.emplace_back([&, w] {
                for (int i = 0; !stop; ++i)
                    send("item", fmt::format("item-{}-{}", w, i), "/v1/chat/completions",
                         json{{"model", "captioner"},
                              {"max_tokens", o_.item_tokens},
                              {"ignore_eos", true},
                              {"messages",
                               json::array({{{"role", "user"},
                                             {"content", fmt::format("Caption photo {}-{}.", w, i)}}})}}
                             .dump(),
                         true);
            });
        std::vector<std::thread> people;
        int n = 0, turns = 0;
        for (const auto& [at, what] : arrivals) {
            std::this_thread::sleep_until(
                t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at)));
            const int i = n++;
            if (what.starts_with("chat:"))
                people.emplace_back(send, "chat", fmt::format("chat-{}", i), "/v1/chat/completions",
                                    chat_body(what.substr(5), i), false);
            else if (what == "turn")
                people.emplace_back(send, "chat", fmt::format("turn-{}", i), "/v1/chat/completions",
                                    conversation_body(turns++), false);
            else if (what == "image")
                people.emplace_back(send, "image", fmt::format("image-{}", i), "/v1/images/generations",
                                    image_body(i), false);
            else
                for (int b = 0; b < o_.burst_images; ++b)
                    people.emplace_back(send, "batch-image", fmt::format("burst-{}-{}", i, b),
                                        "/v1/images/generations", image_body(i * 100 + b), true);
        }
        std::this_thread::sleep_until(
            t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.seconds)));
        f.window = o_.seconds;
        stop = true;
        for (auto& t : people) t.join();
        for (auto& t : workers) t.join();

        // loch's record of each request: its queue wait and time to first token.
        const auto status = json::parse(loch::test::http_get(port_, "/loch/status").body, nullptr, false);
        for (const auto& e : status.value("engines", json::array())) {
            f.swaps += e["counters"].value("loads_ok", std::uint64_t{0});
            for (const auto& [k, v] : e["counters"].value("exits", json::object()).items())
                if (k == "out_of_memory") f.ooms += v.get<std::uint64_t>();
        }
        loch->stop(60s);
        // Each round's logs kept beside the next round's (loch's own log, its request log): a tail is
        // explained from them afterwards.
        const fs::path w(o_.work), requests = w / ("state-" + policy) / "logs" / "requests.jsonl";
        const auto tag = policy + "-r" + std::to_string(round + 1);  // as the output counts rounds
        std::error_code copy_ec;
        fs::copy_file(w / ("loch-" + policy + ".log"), w / ("round-" + tag + ".log"),
                      fs::copy_options::overwrite_existing, copy_ec);
        fs::copy_file(requests, w / ("round-" + tag + "-requests.jsonl"),
                      fs::copy_options::overwrite_existing, copy_ec);
        std::map<std::string, json> records;
        std::ifstream log(requests);
        for (std::string l; std::getline(log, l);) {
            auto j = json::parse(l, nullptr, false);
            if (j.is_object() && j.contains("id")) records[j["id"].get<std::string>()] = j;
        }
        std::vector<std::pair<double, double>> running;  // on the device: granted → answered
        for (const auto& d : done) {
            if (d.status != 200) {
                ++f.errors;
                continue;
            }
            const auto rec = records.find(d.id);
            const double wait = rec == records.end() ? 0 : rec->second.value("queue_wait_s", 0.0);
            running.emplace_back(d.sent + wait, d.answered);
            if (d.kind == "chat" && rec != records.end() && rec->second.contains("ttft_s"))
                f.chat_ttft.push_back(rec->second["ttft_s"].get<double>());
            else if (d.kind == "image" || d.kind == "batch-image")
                f.image_s.push_back(d.answered - d.sent);
            // The batch's work done in the window: captions, or image-burst's pictures.
            if ((d.kind == "item" || d.kind == "batch-image") && d.answered <= o_.seconds) f.items += 1;
        }
        // Busy: the union of the running intervals inside the window.
        std::sort(running.begin(), running.end());
        double until = 0;
        for (auto [a, b] : running) {
            a = std::max(a, until);
            b = std::min(b, o_.seconds);
            if (b > a) f.busy += b - a, until = b;
        }
        return f;
    }

    void report(const std::map<std::string, Figures>& all) {
        std::printf("\n%-14s %9s %9s %11s %10s %6s %4s %7s %6s\n", "policy", "chat p50", "chat p95",
                    "items/min", "image p50", "swaps", "OOM", "idle %", "errors");
        json out = json::object();
        for (const auto& p : o_.policies) {
            const auto& f = all.at(p);
            const double ipm = 60 * f.items / std::max(1e-9, f.window);
            std::printf(
                "%-14s %8.3fs %8.3fs %11.1f %9.2fs %6llu %4llu %6.1f%% %6llu\n", p.c_str(),
                percentile(f.chat_ttft, 0.5), percentile(f.chat_ttft, 0.95), ipm, percentile(f.image_s, 0.5),
                static_cast<unsigned long long>(f.swaps), static_cast<unsigned long long>(f.ooms),
                100 * (1 - f.busy / std::max(1e-9, f.window)), static_cast<unsigned long long>(f.errors));
            out[p] = {{"chat_ttft_p50_s", percentile(f.chat_ttft, 0.5)},
                      {"chat_ttft_p95_s", percentile(f.chat_ttft, 0.95)},
                      {"chats", f.chat_ttft.size()},
                      {"items_per_min", ipm},
                      {"image_p50_s", percentile(f.image_s, 0.5)},
                      {"images", f.image_s.size()},
                      {"swaps", f.swaps},
                      {"ooms", f.ooms},
                      {"idle_share", 1 - f.busy / std::max(1e-9, f.window)},
                      {"errors", f.errors}};
        }
        if (all.contains("loch"))
            for (const char* anchor : {"fifo-lock", "keepalive-lru"}) {
                if (!all.contains(anchor)) continue;
                const auto& l = all.at("loch");
                const auto& a = all.at(anchor);
                const double p95 =
                    percentile(a.chat_ttft, 0.95) / std::max(1e-9, percentile(l.chat_ttft, 0.95));
                const double tput = (l.items / l.window) / std::max(1e-9, a.items / a.window);
                const bool goal = std::string(anchor) == "fifo-lock";
                std::printf(
                    "loch vs %-13s interactive p95 %.1fx better%s, batch throughput %.2fx%s, OOM %llu\n",
                    anchor, p95, goal ? " (goal >= 3x)" : "", tput, goal ? " (goal >= 0.9x)" : "",
                    static_cast<unsigned long long>(l.ooms));
                out["loch"]["vs_" + std::string(anchor)] = {{"p95_better", p95}, {"throughput_ratio", tput}};
            }
        out["trace"] = o_.trace;
        if (o_.json_out.empty()) return;
        std::ofstream(o_.json_out) << out.dump(2) << "\n";
        const auto svg = fs::path(o_.json_out).replace_extension(".svg");
        std::ofstream(svg) << plot(out);
        std::printf("figures: %s, plot: %s\n", o_.json_out.c_str(), svg.string().c_str());
    }

    // The figures as a picture (issue 54): per policy, the person's time to first token (p50 and p95) and
    // the batch's items per minute, side by side, each panel scaled to its largest bar. Plain SVG.
    std::string plot(const json& out) const {
        struct Panel {
            const char* title;
            std::vector<std::pair<const char*, const char*>> bars;  // (key, legend)
            const char* unit;
        };
        const std::vector<Panel> panels = {
            {"the person: time to first token",
             {{"chat_ttft_p50_s", "p50"}, {"chat_ttft_p95_s", "p95"}},
             "s"},
            {"the batch: items per minute", {{"items_per_min", "items/min"}}, ""},
            {"swaps (engine starts)", {{"swaps", "swaps"}}, ""}};
        const char* colours[] = {"#4e79a7", "#f28e2b", "#59a14f"};
        const int panel_w = 300, panel_h = 220, top = 70, bar_area = 150;
        std::string svg = fmt::format(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
            "<text x=\"10\" y=\"20\" font-size=\"15\">mixed-trace: trace {}, {:.0f} s x {} round(s) per "
            "policy, "
            "seed {}, on {}</text>\n",
            panel_w * int(panels.size()) + 20, panel_h + top + 20, o_.trace, o_.seconds, o_.rounds, o_.seed,
            o_.device);
        for (std::size_t p = 0; p < panels.size(); ++p) {
            const auto& panel = panels[p];
            const int x0 = 10 + int(p) * panel_w;
            double most = 1e-9;
            for (const auto& policy : o_.policies)
                for (const auto& [key, legend] : panel.bars)
                    most = std::max(most, out[policy].value(key, 0.0));
            svg += fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}</text>\n", x0, top - 25,
                               panel.title);
            const int group_w = (panel_w - 30) / int(o_.policies.size());
            const int bar_w = std::max(8, (group_w - 10) / int(panel.bars.size()));
            for (std::size_t k = 0; k < o_.policies.size(); ++k) {
                const auto& policy = o_.policies[k];
                const int gx = x0 + int(k) * group_w;
                for (std::size_t b = 0; b < panel.bars.size(); ++b) {
                    const double v = out[policy].value(panel.bars[b].first, 0.0);
                    const int h = int(bar_area * v / most);
                    const int bx = gx + int(b) * bar_w;
                    svg += fmt::format(
                        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{} {}: "
                        "{:.3g}{}</title></rect>\n<text x=\"{}\" y=\"{}\" font-size=\"10\">{:.3g}</text>\n",
                        bx, top + bar_area - h, bar_w - 2, h, colours[b % 3], policy, panel.bars[b].second, v,
                        panel.unit, bx, top + bar_area - h - 3, v);
                }
                svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\">{}</text>\n", gx,
                                   top + bar_area + 14, policy);
            }
            if (panel.bars.size() > 1)
                for (std::size_t b = 0; b < panel.bars.size(); ++b)
                    svg += fmt::format(
                        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" "
                        "y=\"{}\" font-size=\"10\">{}</text>\n",
                        x0 + int(b) * 60, top + bar_area + 24, colours[b % 3], x0 + int(b) * 60 + 14,
                        top + bar_area + 33, panel.bars[b].second);
        }
        return svg + "</svg>\n";
    }

    Options o_;
    fs::path bin_;
    std::uint16_t port_ = 0;
    std::uint64_t budget_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"mixed-trace: loch's scheduling against llama-swap's and Ollama's policies on one trace"};
    app.add_option("--loch", o.loch, "the loch binary (its folder has loch-synth and the engines)")
        ->required();
    app.add_option("--work", o.work, "working folder (models, states, logs)");
    app.add_option("--seconds", o.seconds, "trace length per policy and round");
    app.add_option("--rounds", o.rounds, "rounds (each runs every policy)");
    app.add_option("--trace", o.trace,
                   "mixed, two-people or image-burst (see the top of bench/mixed_trace.cpp)");
    app.add_option("--seed", o.seed, "the trace's seed");
    app.add_option("--burst-every", o.burst_every_s, "image-burst: mean gap between bursts, s");
    app.add_option("--burst-images", o.burst_images, "image-burst: images per burst");
    app.add_option("--context-words", o.context_words, "image-burst: words of the conversation's opening");
    app.add_option("--chat-gap", o.chat_gap_s, "the person's mean gap between chats, s");
    app.add_option("--image-every", o.image_every_s, "mean gap between images, s");
    app.add_option("--workers", o.workers, "batch workers");
    app.add_option("--chat-tokens", o.chat_tokens, "tokens per chat answer");
    app.add_option("--item-tokens", o.item_tokens, "tokens per batch item");
    app.add_option("--image-side", o.image_side, "image width and height");
    app.add_option("--threads", o.threads, "engine threads");
    app.add_option("--chat", o.chat, "loch-synth flags of the chat model");
    app.add_option("--captioner", o.captioner, "loch-synth flags of the batch model");
    app.add_option("--device", o.device, "the device all three share (cpu, nvidia:0)");
    app.add_option("--policies", o.policies, "policies to run");
    app.add_option("--json", o.json_out, "write the figures as JSON");
    CLI11_PARSE(app, argc, argv);
    return Bench(o).run();
}
