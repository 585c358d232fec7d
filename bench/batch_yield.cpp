// batch-yield: does a Batch API batch yield to a person? (issue 29). One `loch serve`, one chat model, three
// phases on the same engine, measured side by side in one run:
//
//   idle:   a person chats (sequential requests, seeded Poisson gaps) with nothing else running;
//   alone:  a captioning-like batch runs for as long as the idle phase took: its items per minute;
//   mixed:  the same person's requests while the batch runs: their latency, and the batch's items/min.
//
// Figures: the person's p50/p95 idle and mixed (goal: mixed p95 ≤ 1.2× idle), the batch's throughput mixed
// and alone (goal: ≥ 0.8×), and how many items were preempted.
//
//   batch-yield --loch build/bin/loch --work /tmp/batch-yield [--synth "--preset demo"] [--chats 30] [--gap
//   2]
//               [--item-tokens 24] [--chat-tokens 24] [--threads 2] [--seed 7] [--rounds 3] [--json OUT]
//               [--vision [--mmproj "--mmproj llava-1.5 --layers 6 …"] [--image PNG]]
// --vision: the captioning batch of issue 29, scaled down — the chat model gets a projector from loch-synth
// (args.mmproj) and every batch item and every one of the person's requests carries the image as a data URL.
// Exit status 0 when it ran (the goals are reported, not enforced: a bench, not a test).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/data_url.hpp"
#include "support/engine_process.hpp"
#include "support/http_client.hpp"
#include "support/process.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    std::string loch, work = "/tmp/loch-batch-yield", json_out;
    // A chat model of a realistic speed on a small CPU (~150M parameters, zero weights: same compute).
    std::string synth =
        "--arch llama --layers 12 --embd 1024 --heads 16 --ff 2816 --vocab 32000 --ctx 4096 --weights zeros";
    int chats = 30, item_tokens = 24, chat_tokens = 24, threads = 2, rounds = 3;
    double gap_s = 2.0;
    unsigned seed = 7;
    // --vision: a CLIP tower a 2-core CPU encodes in a fraction of a second (112 px: 64 tokens an image).
    bool vision = false;
    std::string mmproj = "--mmproj llava-1.5 --layers 6 --embd 512 --heads 8 --ff 2048 --image-size 112";
    std::string image = std::string(LOCH_TEST_DATA_DIR) + "/photo-320x240.png";
};

std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> out;
    for (std::size_t i = 0, j; i < s.size(); i = j + 1) {
        j = s.find(' ', i);
        if (j == std::string::npos) j = s.size();
        if (j > i) out.push_back(s.substr(i, j - i));
    }
    return out;
}

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(std::ceil(p * double(v.size()))) - 1;
    return v[std::min(i, v.size() - 1)];
}

// A chat request; with an image (a data URL), the text and the image as OpenAI's content parts.
std::string chat_body(int max_tokens, const std::string& text, const std::string& image = "") {
    json content = text;
    if (!image.empty())
        content = json::array(
            {{{"type", "text"}, {"text", text}}, {{"type", "image_url"}, {"image_url", {{"url", image}}}}});
    return json{{"model", "chat"},
                {"max_tokens", max_tokens},
                {"ignore_eos", true},
                {"messages", json::array({{{"role", "user"}, {"content", content}}})}}
        .dump();
}

class Bench {
  public:
    explicit Bench(Options o) : o_(std::move(o)) {}

    int run() {
        fs::create_directories(o_.work);
        const fs::path bin = fs::absolute(o_.loch).parent_path();
        const auto model = fs::path(o_.work) / "chat.gguf";
        std::vector<std::string> synth_args = words(o_.synth);
        // The projector's output width is the chat model's (--embd).
        std::string text_embd;
        for (std::size_t i = 0; i + 1 < synth_args.size(); ++i)
            if (synth_args[i] == "--embd") text_embd = synth_args[i + 1];
        synth_args.insert(synth_args.end(), {"--out", model.string()});
        fs::remove(model);
        if (loch::test::run_to_completion(bin / "loch-synth", synth_args, fs::path(o_.work) / "synth.log",
                                          600s) != 0)
            return fail("loch-synth failed: see " + (fs::path(o_.work) / "synth.log").string());
        std::string mmproj_line;
        if (o_.vision) {
            if (text_embd.empty())
                return fail("--vision needs --embd in --synth (the projector's output width)");
            const auto mmproj = fs::path(o_.work) / "mmproj.gguf";
            auto args = words(o_.mmproj);
            args.insert(args.end(), {"--text-embd", text_embd, "--out", mmproj.string()});
            if (loch::test::run_to_completion(bin / "loch-synth", args,
                                              fs::path(o_.work) / "synth-mmproj.log", 600s) != 0)
                return fail("loch-synth --mmproj failed: see " +
                            (fs::path(o_.work) / "synth-mmproj.log").string());
            mmproj_line = ", mmproj: " + mmproj.string();
            image_ = loch::test::png_data_url(o_.image);
            if (image_.size() < 40) return fail("cannot read the image " + o_.image);
        }
        port_ = loch::test::free_port();
        const auto cfg = fs::path(o_.work) / "loch.yaml";
        fs::remove_all(fs::path(o_.work) / "state");
        std::ofstream(cfg) << fmt::format(
            "listen: 127.0.0.1\nstate_dir: {}\nengine_dir: {}\nmodels:\n  - name: chat\n    path: {}\n"
            "    args: {{ctx: 4096, parallel: 2, threads: {}{}}}\n",
            (fs::path(o_.work) / "state").string(), bin.string(), model.string(), o_.threads, mmproj_line);
        loch::test::Process loch(bin / "loch",
                                 {"serve", "--config", cfg.string(), "--port", std::to_string(port_)},
                                 fs::path(o_.work) / "loch.log");
        if (!wait_health()) return fail("loch serve did not come up: see " + o_.work + "/loch.log");
        for (int i = 0; i < 3; ++i)  // the engine's first requests are slower: not in the idle figures
            if (post("/v1/chat/completions", chat_body(o_.chat_tokens, "warm up", image_)).status != 200)
                return fail("warm-up failed");

        std::printf(
            "batch-yield: loch-synth %s; %d chats (mean gap %.1f s, %d tokens), items of %d tokens%s\n",
            o_.synth.c_str(), o_.chats, o_.gap_s, o_.chat_tokens, o_.item_tokens,
            o_.vision
                ? fmt::format("; every request captions {} (projector: {})", o_.image, o_.mmproj).c_str()
                : "");
        // The three phases interleaved, `rounds` times (idle, alone, mixed; each round the person's next
        // requests): this box's speed drifts by up to 2x over minutes (other tenants), so phases run back to
        // back in one long sequence each would compare different machines.
        std::vector<double> idle, mixed;
        double window = 0, busy = 0, alone_items = 0, alone_s = 0, mixed_items = 0, mixed_s = 0;
        int preempted = 0;
        for (int round = 0; round < o_.rounds; ++round) {
            const int first = round * o_.chats / o_.rounds, last = (round + 1) * o_.chats / o_.rounds;
            const auto t_idle = Clock::now();
            const auto idle_round = person(first, last, fmt::format("idle {}", round));
            const double w = seconds_since(t_idle);
            window += w;
            for (double s : idle_round) busy += s;
            idle.insert(idle.end(), idle_round.begin(), idle_round.end());
            const auto alone = batch_during(fmt::format("alone {}", round), [&] {
                std::this_thread::sleep_for(std::chrono::duration<double>(w));
            });
            alone_items += alone.items;
            alone_s += alone.seconds;
            std::vector<double> mixed_round;
            const auto with = batch_during(fmt::format("mixed {}", round), [&] {
                mixed_round = person(first, last, fmt::format("mixed {}", round));
            });
            mixed.insert(mixed.end(), mixed_round.begin(), mixed_round.end());
            mixed_items += with.items;
            mixed_s += with.seconds;
            preempted += with.preempted;
            std::printf(
                "  round %d: idle p95 %.3f s; alone %.1f items/min; mixed p95 %.3f s, %.1f items/min\n",
                round + 1, percentile(idle_round, 0.95), 60.0 * alone.items / alone.seconds,
                percentile(mixed_round, 0.95), 60.0 * with.items / with.seconds);
        }
        const double alone_per_minute = 60.0 * alone_items / std::max(1e-9, alone_s);
        const double mixed_per_minute = 60.0 * mixed_items / std::max(1e-9, mixed_s);
        std::printf(
            "  idle:  person p50 %.3f s, p95 %.3f s (%.0f s; the person keeps the engine busy %.0f %% of "
            "it)\n",
            percentile(idle, 0.5), percentile(idle, 0.95), window, 100.0 * busy / window);
        std::printf("  alone: batch %.1f items/min\n", alone_per_minute);
        std::printf("  mixed: person p50 %.3f s, p95 %.3f s; batch %.1f items/min, %d preempted\n",
                    percentile(mixed, 0.5), percentile(mixed, 0.95), mixed_per_minute, preempted);

        const double p95_ratio = percentile(mixed, 0.95) / std::max(1e-9, percentile(idle, 0.95));
        const double tput_ratio = mixed_per_minute / std::max(1e-9, alone_per_minute);
        std::printf("  person p95 with a batch / idle: %.2fx (goal <= 1.2x) %s\n", p95_ratio,
                    p95_ratio <= 1.2 ? "met" : "NOT met");
        std::printf("  batch throughput with a person / alone: %.2fx (goal >= 0.8x) %s\n", tput_ratio,
                    tput_ratio >= 0.8 ? "met" : "NOT met");
        if (!o_.json_out.empty())
            std::ofstream(o_.json_out) << json{{"model", o_.synth},
                                               {"vision", o_.vision ? json(o_.mmproj) : json(nullptr)},
                                               {"chats", o_.chats},
                                               {"rounds", o_.rounds},
                                               {"idle_p50_s", percentile(idle, 0.5)},
                                               {"idle_p95_s", percentile(idle, 0.95)},
                                               {"person_busy_share", busy / window},
                                               {"mixed_p50_s", percentile(mixed, 0.5)},
                                               {"mixed_p95_s", percentile(mixed, 0.95)},
                                               {"alone_items_per_min", alone_per_minute},
                                               {"mixed_items_per_min", mixed_per_minute},
                                               {"preempted", preempted},
                                               {"p95_ratio", p95_ratio},
                                               {"throughput_ratio", tput_ratio}}
                                              .dump(2)
                                       << "\n";
        loch.stop(30s);
        return 0;
    }

  private:
    struct BatchFigures {
        double items = 0, seconds = 0;
        int preempted = 0;
    };

    int fail(const std::string& why) {
        std::fprintf(stderr, "batch-yield: %s\n", why.c_str());
        return 1;
    }

    bool wait_health() { return loch::test::wait_until_ok(port_, "/health", 60s); }

    loch::test::HttpResponse post(const std::string& target, const std::string& body) {
        return loch::test::http_post_json(port_, target, body, 600s);
    }

    json batch(const std::string& id) {
        return json::parse(loch::test::http_get(port_, "/v1/batches/" + id).body);
    }

    // A batch's input file: more items than any phase finishes (each phase cancels its batch at the end).
    // Every phase's prompts are its own (`tag`): llama-server keeps finished prompts in a host-memory cache
    // (--cache-ram), so a phase that replayed an earlier phase's prompts would skip their image encoding and
    // prefill and look faster than it is.
    std::string write_input(const std::string& tag) {
        std::string text;
        for (int i = 0; i < 4000; ++i)
            text +=
                json{{"custom_id", fmt::format("photo-{}", i)},
                     {"method", "POST"},
                     {"url", "/v1/chat/completions"},
                     {"body", json::parse(chat_body(o_.item_tokens,
                                                    fmt::format("Caption photo {} ({}).", i, tag), image_))}}
                    .dump() +
                "\n";
        const std::string b = "----batch-yield";
        loch::test::HttpRequest r;
        r.method = boost::beast::http::verb::post;
        r.port = port_;
        r.target = "/v1/files";
        r.content_type = "multipart/form-data; boundary=" + b;
        r.body = "--" + b + "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--" + b +
                 "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"photos.jsonl\"\r\n\r\n" +
                 text + "\r\n--" + b + "--\r\n";
        r.timeout = 300s;
        return json::parse(loch::test::http_request(r).body).value("id", "");
    }

    // A person: one chat at a time, seeded exponential gaps; each one's latency.
    // Requests [first, last) of the person's seeded sequence (the same gaps in every phase; `tag` keeps the
    // prompts apart from every other phase's).
    std::vector<double> person(int first, int last, const std::string& tag) {
        std::mt19937 rng(o_.seed);
        std::exponential_distribution<double> gap(1.0 / o_.gap_s);
        for (int i = 0; i < first; ++i) gap(rng);
        std::vector<double> out;
        for (int i = first; i < last; ++i) {
            std::this_thread::sleep_for(std::chrono::duration<double>(gap(rng)));
            const auto t0 = Clock::now();
            const auto r = post("/v1/chat/completions",
                                chat_body(o_.chat_tokens, fmt::format("Question {} ({})?", i, tag), image_));
            if (r.status == 200) out.push_back(seconds_since(t0));
        }
        return out;
    }

    // Runs `during` while a batch runs; the batch's items per minute over that time.
    template <class F>
    BatchFigures batch_during(const std::string& tag, F during) {
        const auto created = post("/v1/batches", json{{"input_file_id", write_input(tag)},
                                                      {"endpoint", "/v1/chat/completions"},
                                                      {"completion_window", "24h"}}
                                                     .dump());
        const std::string id = json::parse(created.body).value("id", "");
        while (batch(id)["request_counts"]["completed"].get<int>() < 4) std::this_thread::sleep_for(50ms);
        const auto c0 = batch(id)["request_counts"]["completed"].get<int>();
        const auto t0 = Clock::now();
        during();
        const auto b1 = batch(id);
        const double s = seconds_since(t0);
        BatchFigures f;
        f.items = double(b1["request_counts"]["completed"].get<int>() - c0);
        f.seconds = s;
        f.preempted = b1["loch"].value("preempted", 0);
        post("/v1/batches/" + id + "/cancel", "{}");
        while (batch(id)["status"] != "cancelled") std::this_thread::sleep_for(100ms);
        return f;
    }

    Options o_;
    std::string image_;  // --vision: the image every request carries, as a data URL
    std::uint16_t port_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"batch-yield: a person's latency and a batch's throughput, each with and without the other"};
    Options o;
    app.add_option("--loch", o.loch, "the loch binary (loch-synth and the engines beside it)")->required();
    app.add_option("--work", o.work, "work folder");
    app.add_option("--synth", o.synth,
                   "loch-synth arguments of the chat model (\"--preset demo\": a fast one)");
    app.add_option("--chats", o.chats, "the person's requests per phase");
    app.add_option("--gap", o.gap_s, "mean seconds between the person's requests");
    app.add_option("--item-tokens", o.item_tokens, "tokens per batch item");
    app.add_option("--chat-tokens", o.chat_tokens, "tokens per chat answer");
    app.add_option("--threads", o.threads, "llama-server threads");
    app.add_option("--seed", o.seed, "the person's arrival times");
    app.add_option("--rounds", o.rounds, "idle/alone/mixed rounds, interleaved (the chats split over them)");
    app.add_option("--json", o.json_out, "also write the figures here");
    app.add_flag("--vision", o.vision, "caption an image in every request (a projector from loch-synth)");
    app.add_option("--mmproj", o.mmproj, "loch-synth arguments for the projector (--text-embd is added)");
    app.add_option("--image", o.image, "the PNG every request carries");
    CLI11_PARSE(app, argc, argv);
    return Bench(o).run();
}
