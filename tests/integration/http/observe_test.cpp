// Seeing and steering loch, end to end against real llama-server engines and real clients: the dashboard in a
// real headless browser (Chromium), `loch ps`, /metrics through Prometheus' own parser, Ollama's Python
// client, SSE keep-alive comments during a cold load, and one request-log line per request.
#include <csignal>
#include <fstream>
#include <future>
#include <regex>
#include <set>

#include <thread>

#include <gtest/gtest.h>

#include "fixtures.hpp"

namespace loch::itest {
namespace {

std::size_t count_lines(const fs::path& f) {
    std::ifstream in(f);
    std::size_t n = 0;
    for (std::string l; std::getline(in, l);) n += !l.empty();
    return n;
}
// The log's lines once `expected` are there (or 5 s passed): a request's line is written when it has
// finished, which may be just after its client read the last byte.
std::size_t lines_in(const fs::path& f, std::size_t expected) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (count_lines(f) < expected && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return count_lines(f);
}

class Observe : public ::testing::Test {
  protected:
    test::TempDir dir{"loch-itest-observe"};
    std::string global() const { return "log_dir: " + (dir.path() / "logs").string() + "\n"; }
    fs::path request_log() const { return dir.path() / "logs" / "requests.jsonl"; }
    json metrics(LochServer& loch, const std::string& tag) {
        const auto m = loch.get("/metrics");
        EXPECT_EQ(m.status, 200);
        const fs::path in = dir.path() / ("metrics-" + tag + ".txt");
        std::ofstream(in) << m.body;
        const auto [rc, out] = run(python(), {peer("prometheus_parse.py").string(), in.string()},
                                   dir.path() / ("parse-" + tag + ".log"));
        EXPECT_EQ(rc, 0) << out;
        return last_json_line(out);
    }
};

double sample(const json& families, const std::string& family, const std::string& key) {
    if (!families.contains(family)) return -1;
    const auto& s = families[family]["samples"];
    return s.contains(key) ? s[key].get<double>() : 0;
}

TEST_F(Observe, MetricsParseWithPrometheusParserAndMoveWithTheTrafficAndEveryRequestHasALogLine) {
    LochServer loch(dir.path(),
                    config(dir, "2GiB", model_entry("demo", models().demo.path(), kArgs), global()));
    const auto before = metrics(loch, "before");
    ASSERT_TRUE(before.is_object()) << before;
    EXPECT_EQ(before["vllm:num_requests_running"]["type"], "gauge");

    for (int i = 0; i < 2; ++i)
        ASSERT_EQ(loch.post("/v1/chat/completions", chat("demo", false, 4)).status, 200);
    {
        SseClient s(loch.port(), "/v1/chat/completions", chat("demo", true, 4));
        ASSERT_EQ(s.status(), 200);
        s.rest();
    }
    EXPECT_EQ(loch.post("/v1/chat/completions", chat("no-such-model", false, 4)).status, 404);

    const auto after = metrics(loch, "after");
    const std::string ok = R"(model="demo",outcome="ok",route="/v1/chat/completions")";
    EXPECT_EQ(sample(after, "loch_requests", "loch_requests_total{" + ok + "}") -
                  std::max(0.0, sample(before, "loch_requests", "loch_requests_total{" + ok + "}")),
              3);
    // An unknown name is not a label of its own (clients could make the series unbounded).
    EXPECT_EQ(
        sample(after, "loch_requests",
               R"(loch_requests_total{model="-",outcome="model_not_found",route="/v1/chat/completions"})"),
        1);
    EXPECT_EQ(sample(after, "loch_request_duration_seconds",
                     R"(loch_request_duration_seconds_count{model="demo",route="/v1/chat/completions"})"),
              3);
    EXPECT_EQ(sample(after, "loch_time_to_first_token_seconds",
                     R"(loch_time_to_first_token_seconds_count{model="demo"})"),
              1);
    EXPECT_GE(sample(after, "loch_generated_tokens", R"(loch_generated_tokens_total{model="demo"})"), 3);
    EXPECT_EQ(sample(after, "loch_engine_loads", R"(loch_engine_loads_total{model="demo",outcome="ready"})"),
              1);
    EXPECT_EQ(sample(after, "loch_model_state", R"(loch_model_state{model="demo",state="ready"})"), 1);
    EXPECT_EQ(sample(after, "loch_model_requests_waiting", R"(loch_model_requests_waiting{model="demo"})"),
              0);
    // What an endpoint picker reads (issue 30): each vllm: name is one box-level series of its type.
    for (const char* name :
         {"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
          "vllm:lora_requests_info", "loch_device_memory_free_bytes"}) {
        ASSERT_TRUE(after.contains(name)) << name;
        EXPECT_EQ(after[name]["type"], "gauge") << name;
        if (std::string_view(name).starts_with("vllm:"))
            EXPECT_EQ(after[name]["samples"].size(), 1u) << name << ": " << after[name];
    }
    EXPECT_EQ(sample(after, "vllm:num_requests_running", "vllm:num_requests_running{}"), 0);
    bool resident = false;
    for (const auto& [k, v] : after["vllm:lora_requests_info"]["samples"].items())
        resident = resident || (k.find(R"(running_lora_adapters="demo")") != std::string::npos &&
                                k.find(R"(max_lora="1")") != std::string::npos);
    EXPECT_TRUE(resident) << after["vllm:lora_requests_info"];
    EXPECT_EQ(
        sample(after, "loch_queue_wait_seconds", R"(loch_queue_wait_seconds_count{priority="interactive"})"),
        3);
    // The ledger by holder and source.
    bool reservation = false;
    for (const auto& [k, v] : after["loch_reservation_bytes"]["samples"].items())
        reservation |= k.find(R"(model="demo")") != std::string::npos &&
                       k.find("source=") != std::string::npos && v.get<double>() > 0;
    EXPECT_TRUE(reservation) << after["loch_reservation_bytes"];

    // One line per model request (the /metrics scrapes are not model requests), with its figures.
    ASSERT_EQ(lines_in(request_log(), 4), 4u);
    std::ifstream in(request_log());
    std::vector<json> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(json::parse(l));
    EXPECT_EQ(lines[0]["decision"].get<std::string>().rfind("cold start on cpu", 0), 0u) << lines[0];
    EXPECT_GT(lines[0]["queue_wait_s"].get<double>(), 0);
    EXPECT_EQ(lines[1]["decision"], "ready");
    EXPECT_EQ(lines[2]["stream"], true);
    EXPECT_TRUE(lines[2].contains("ttft_s"));
    EXPECT_GT(lines[2]["completion_tokens"].get<int>(), 0);
    EXPECT_EQ(lines[3]["status"], 404);
    EXPECT_EQ(lines[3]["error_type"], "model_not_found");
    std::set<std::string> ids;
    for (const auto& l : lines) ids.insert(l["id"].get<std::string>());
    EXPECT_EQ(ids.size(), 4u);
    // `loch logs` prints the engine's last lines.
    const auto [logs_rc, logs] =
        run(bin() / "loch", {"logs", "demo", "-n", "3", "--url", "127.0.0.1:" + std::to_string(loch.port())},
            dir.path() / "logs.log", 30s);
    EXPECT_EQ(logs_rc, 0) << logs;
    EXPECT_EQ(std::count(logs.begin(), logs.end(), '\n'), 3) << logs;
    // Other requests have their line too (the monitoring reads, /metrics here, do not).
    EXPECT_EQ(loch.get("/v1/models").status, 200);
    EXPECT_EQ(loch.get("/no/such/path").status, 404);
    ASSERT_EQ(lines_in(request_log(), 7), 7u);  // + the GET of `loch logs`
    std::ifstream again(request_log());
    std::vector<json> all;
    for (std::string l; std::getline(again, l);) all.push_back(json::parse(l));
    EXPECT_EQ(all[4]["route"], "GET /loch/engines/demo/log");
    EXPECT_EQ(all[5]["route"], "GET /v1/models");
    EXPECT_EQ(all[6]["status"], 404);
    EXPECT_EQ(all[6]["error_type"], "not_found");
    // loch's own log keeps the requests that went wrong; the ones that succeeded are in the file only (at
    // the default level).
    const std::string own = loch.log();
    const auto line_for = [&](const json& l) { return "\"id\":\"" + l["id"].get<std::string>() + "\""; };
    EXPECT_NE(own.find(line_for(lines[3])), std::string::npos) << "the failed request's line";
    for (int i = 0; i < 3; ++i) EXPECT_EQ(own.find(line_for(lines[i])), std::string::npos) << lines[i];
}

// Issue 53: the coding agents' routes are not blind in requests.jsonl — tokens on each, TTFT on streams.
TEST_F(Observe, TheRequestLogHasTokensOnEveryRouteAndTimeToFirstTokenOnEveryStream) {
    LochServer loch(dir.path(),
                    config(dir, "2GiB", model_entry("demo", models().demo.path(), kArgs), global()));
    const json messages = {
        {"model", "demo"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
    const json responses = {{"model", "demo"}, {"max_output_tokens", 4}, {"input", "Hi"}};
    for (const auto& [route, body] :
         {std::pair{"/v1/messages", messages}, std::pair{"/v1/responses", responses}}) {
        ASSERT_EQ(loch.post(route, body.dump()).status, 200) << route;
        auto streamed = body;
        streamed["stream"] = true;
        SseClient s(loch.port(), route, streamed.dump());
        ASSERT_EQ(s.status(), 200) << route;
        s.rest();
    }
    ASSERT_EQ(lines_in(request_log(), 4), 4u);
    std::ifstream in(request_log());
    for (std::string l; std::getline(in, l);) {
        const auto line = json::parse(l);
        SCOPED_TRACE(l);
        EXPECT_EQ(line["outcome"], "ok");
        EXPECT_GT(line.value("prompt_tokens", 0), 0);
        EXPECT_GT(line.value("completion_tokens", 0), 0);
        EXPECT_LE(line.value("completion_tokens", 0), 4);
        if (line["stream"] == true) EXPECT_TRUE(line.contains("ttft_s"));
    }
}

TEST_F(Observe, WithLogLevelDebugLochsOwnLogHasTheSuccessfulRequestsToo) {
    LochServer loch(dir.path(),
                    config(dir, "2GiB", model_entry("demo", models().demo.path(), kArgs), global()),
                    {"--log-level", "debug"});
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("demo", false, 4)).status, 200);
    ASSERT_EQ(lines_in(request_log(), 1), 1u);
    std::ifstream in(request_log());
    std::string l;
    std::getline(in, l);
    const auto id = json::parse(l)["id"].get<std::string>();
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (loch.log().find("\"id\":\"" + id + "\"") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
    EXPECT_NE(loch.log().find("\"id\":\"" + id + "\""), std::string::npos) << loch.log();
}

TEST_F(Observe, OllamasPythonClientListsChatsStreamsGeneratesAndEmbeds) {
    LochServer loch(dir.path(),
                    config(dir, "2GiB",
                           model_entry("demo", models().demo.path(), kArgs) +
                               model_entry("embed", models().demo.path(),
                                           kArgs + "      extra: [--embeddings, --pooling, mean]\n"),
                           global()));
    const auto [rc, out] =
        run(python(), {peer("ollama_client.py").string(), std::to_string(loch.port()), "demo", "embed"},
            dir.path() / "ollama-client.log", 300s);
    ASSERT_EQ(rc, 0) << out << loch.log();
    const auto seen = last_json_line(out);
    EXPECT_EQ(seen["tags"], json::array({"demo", "embed"})) << seen;
    EXPECT_GT(seen["chat"]["eval_count"].get<int>(), 0);
    EXPECT_GE(seen["chat_stream"]["chunks"].get<int>(), 2);
    EXPECT_EQ(seen["embed"]["vectors"], 2);
    // keep_alive "10m" from the client became the model's keep-alive.
    EXPECT_EQ(loch.engine_status("demo")["keep_alive_s"], 600);
    // An embeddings request to a model started without --embeddings: the loch.yaml fix, not the engine's
    // flag.
    const auto r = loch.post("/v1/embeddings", R"({"model":"demo","input":"x"})");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("args: {extra: [\\\"--embeddings\\\"]}"), std::string::npos) << r.body;
}

TEST_F(Observe, AColdLoadStreamsKeepAliveCommentsAndProgressAndAnswersWithTheConfiguredName) {
    // A real llama-server behind a start-up delay (tests/peers/slow_start.py), as a `command` engine: it
    // names the model by its file, loch by the configured name.
    const std::string entry =
        "  - name: slow\n    engine: command\n    path: " + models().demo.path().string() +
        "\n    command:\n      argv: [/usr/bin/python3, " + peer("slow_start.py").string() + ", \"3\", " +
        (bin() / "llama-server").string() +
        ", -m, \"{model_path}\", --host, \"{host}\", --port, \"{port}\", -c, \"2048\", -t, "
        "\"1\"]\n    memory: 300MiB\n";
    LochServer loch(dir.path(), config(dir, "2GiB", entry, global()));
    SseClient s(loch.port(), "/v1/chat/completions", chat("slow", true, 4, R"({"loch":{"progress":true}})"));
    ASSERT_EQ(s.status(), 200);
    EXPECT_EQ(s.content_type(), "text/event-stream");
    int comments = 0, progress = 0, chunks = 0;
    bool data_before_comment = false;
    while (auto e = s.next_event(60s)) {
        if (e->starts_with(": loch: waiting")) {
            ++comments;
            data_before_comment |= chunks > 0;
            EXPECT_NE(e->find("'slow'"), std::string::npos) << *e;
        } else if (e->starts_with("event: loch.progress")) {
            ++progress;
            const auto p = event_json(*e);
            EXPECT_EQ(p["model"], "slow") << *e;
            EXPECT_TRUE(p["state"] == "loading" || p["state"] == "stopped") << *e;
        } else if (auto j = event_json(*e); j.is_object()) {
            ++chunks;
            EXPECT_EQ(j["model"], "slow") << *e;
        }
    }
    EXPECT_GE(comments, 1) << loch.log();
    EXPECT_GE(progress, 1) << loch.log();
    EXPECT_GE(chunks, 1) << loch.log();
    EXPECT_FALSE(data_before_comment);
    // A warm request: no comment, straight to the engine's events; a non-streaming one gets JSON.
    const auto warm = loch.post("/v1/chat/completions", chat("slow", false, 4));
    ASSERT_EQ(warm.status, 200) << warm.body;
    EXPECT_EQ(json::parse(warm.body)["model"], "slow");
    EXPECT_EQ(lines_in(request_log(), 2), 2u);
}

// What the page shows for each model / device / waiter, read from Chromium's DOM after its scripts ran.
struct Dom {
    std::map<std::string, std::string> model_state;
    std::set<std::string> devices, reserved_engines, waiting;
    // The last hour's plots: holder/source of every stacked-area step per device plot, the marks
    // (kind/model), and the points of each line (the queue's, TTFT p50/p95).
    std::map<std::string, std::set<std::string>> history_holders;
    std::set<std::string> history_marks;
    std::map<std::string, int> history_points;
    std::string text;
};
Dom dump_dom(const std::string& url, const fs::path& out_dir, const std::string& tag) {
    const auto [rc, html] =
        run("/usr/bin/chromium-headless-shell",
            {"--no-sandbox", "--disable-gpu", "--virtual-time-budget=4000", "--dump-dom", url},
            out_dir / ("dom-" + tag + ".html"), 60s);
    EXPECT_EQ(rc, 0) << out_dir;
    Dom d;
    d.text = html.substr(0, html.find("<script>"));  // what was rendered, not the code that renders it
    const std::string& html_text = d.text;
    const std::regex model(R"re(<tr data-model="([^"]+)" data-state="([^"]+)")re"),
        device(R"re(class="device" data-device="([^"]+)")re"),
        reservation(R"re(class="reservation" data-engine="([^"]+)" data-source="([a-z-]+)")re"),
        waiter(R"re(data-waiting-model="([^"]+)")re");
    for (std::sregex_iterator it(html_text.begin(), html_text.end(), model), end; it != end; ++it)
        d.model_state[(*it)[1]] = (*it)[2];
    for (std::sregex_iterator it(html_text.begin(), html_text.end(), device), end; it != end; ++it)
        d.devices.insert((*it)[1]);
    for (std::sregex_iterator it(html_text.begin(), html_text.end(), reservation), end; it != end; ++it)
        d.reserved_engines.insert(std::string((*it)[1]) + "/" + std::string((*it)[2]));
    for (std::sregex_iterator it(html_text.begin(), html_text.end(), waiter), end; it != end; ++it)
        d.waiting.insert((*it)[1]);
    const std::regex plot(R"re(<svg class="history" data-device="([^"]+)"[^>]*>(.*?)</svg>)re"),
        step(R"re(<rect data-holder="([^"]+)" data-source="([a-z-]+)")re"),
        mark(R"re(class="mark" data-kind="([^"]+)" data-model="([^"]+)")re"),
        line(R"re(<polyline data-series="([^"]+)" data-points="([0-9]+)")re");
    for (std::sregex_iterator it(html_text.begin(), html_text.end(), plot), end; it != end; ++it) {
        const std::string device = (*it)[1], body = (*it)[2];
        for (std::sregex_iterator s(body.begin(), body.end(), step); s != end; ++s)
            d.history_holders[device].insert(std::string((*s)[1]) + "/" + std::string((*s)[2]));
        for (std::sregex_iterator m(body.begin(), body.end(), mark); m != end; ++m)
            d.history_marks.insert(std::string((*m)[1]) + "/" + std::string((*m)[2]));
    }
    for (std::sregex_iterator it(html_text.begin(), html_text.end(), line), end; it != end; ++it)
        d.history_points[(*it)[1]] = std::stoi((*it)[2]);
    return d;
}

fs::path artifacts() {
    const char* a = std::getenv("LOCH_TEST_ARTIFACTS");
    fs::path p = a && *a ? fs::path(a) : fs::temp_directory_path() / "loch-test-artifacts";
    fs::create_directories(p);
    return p;
}

TEST_F(Observe, TheDashboardShowsDevicesMemoryBySourceModelsAndTheQueueLiveAndLochPsTheSame) {
    // chat (interactive, busy with a long stream) and batch cannot both fit in 700 MiB: the batch request
    // waits, with the reason naming chat, until chat is idle long enough to go (rule 2b, or its keep-alive).
    // huge never fits: its refusal is a mark on the history plot.
    LochServer loch(dir.path(),
                    config(dir, "700MiB",
                           long_model("    memory: 400MiB\n    keep_alive: 2s\n") +
                               model_entry("batch", models().demo.path(),
                                           kArgs + "    memory: 400MiB\n    priority: batch\n") +
                               model_entry("huge", models().demo.path(), kArgs + "    memory: 2GiB\n"),
                           global() + "max_wait: 120s\n"));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("huge", false, 4)).status, 503);
    const std::string url = "http://127.0.0.1:" + std::to_string(loch.port()) + "/";
    SseClient stream(loch.port(), "/v1/chat/completions", long_stream("tiny"));
    ASSERT_EQ(stream.status(), 200);
    ASSERT_TRUE(stream.next_event());
    auto batch = std::async(std::launch::async,
                            [&] { return loch.post("/v1/chat/completions", chat("batch", false, 4)); });
    json st;
    for (int i = 0; i < 200; ++i) {
        st = loch.status();
        if (!st["queue"]["waiting"].empty()) break;
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_FALSE(st["queue"]["waiting"].empty()) << st.dump(1);
    const std::string reason = st["queue"]["waiting"][0]["reason"];
    EXPECT_NE(reason.find("tiny"), std::string::npos) << reason;
    EXPECT_NE(reason.find("busy"), std::string::npos) << reason;

    const Dom busy = dump_dom(url, dir.path(), "busy");
    run("/usr/bin/chromium-headless-shell",
        {"--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=4000",
         "--window-size=1400,1000", "--screenshot=" + (artifacts() / "dashboard-busy.png").string(), url},
        dir.path() / "screenshot.log", 60s);
    EXPECT_TRUE(fs::exists(artifacts() / "dashboard-busy.png"));
    // What the page shows is what /loch/status says.
    EXPECT_EQ(busy.model_state.at("tiny"), "busy") << busy.text.substr(0, 3000);
    EXPECT_EQ(busy.model_state.at("batch"), "stopped");
    EXPECT_EQ(busy.devices, std::set<std::string>{"cpu"});
    std::set<std::string> expected;
    for (const auto& r : st["devices"][0]["reservations"])
        expected.insert(r["engine"].get<std::string>() + "/" + r["figure"]["source"].get<std::string>());
    EXPECT_EQ(busy.reserved_engines, expected);
    EXPECT_EQ(busy.waiting, std::set<std::string>{"batch"});
    EXPECT_NE(busy.text.find("held by tiny"), std::string::npos);
    // Each waiter's position and ETA (or why it is unknown), and the id `loch cancel` takes.
    EXPECT_NE(busy.text.find("position 1, ETA"), std::string::npos) << busy.text.substr(0, 3000);
    EXPECT_NE(busy.text.find(st["queue"]["waiting"][0].value("request", "?")), std::string::npos);

    // loch ps says the same.
    const auto [ps_rc, ps] = run(bin() / "loch", {"ps", "--url", "127.0.0.1:" + std::to_string(loch.port())},
                                 dir.path() / "ps.log", 30s);
    EXPECT_EQ(ps_rc, 0) << ps;
    EXPECT_TRUE(
        std::regex_search(ps, std::regex(R"(tiny\s+busy\s+cpu\s+400\.0 MiB \(configured\)\s+1/1 \+0? ?)")) ||
        std::regex_search(ps, std::regex(R"(tiny\s+busy\s+cpu\s+\S+ MiB \(\w+\)\s+1/1)")))
        << ps;
    EXPECT_NE(ps.find("batch"), std::string::npos) << ps;  // waiting: listed though stopped

    // The stream ends; chat's keep-alive passes; batch takes the memory and is answered.
    stream.close();
    const auto r = batch.get();
    ASSERT_EQ(r.status, 200) << r.body;
    const Dom after = dump_dom(url, dir.path(), "after");
    EXPECT_EQ(after.model_state.at("batch"), "ready");
    EXPECT_TRUE(after.model_state.at("tiny") == "stopped" || after.model_state.at("tiny") == "stopping");
    EXPECT_TRUE(after.waiting.empty());
    // tiny went when it had been idle twice its reload (rule 2b) or when its keep-alive ran out, whichever
    // came first: the stop and its reason are in the recent list, and an eviction is a mark on the plot.
    const bool evicted = after.text.find("evicted to make room for 'batch'") != std::string::npos;
    EXPECT_TRUE(evicted || after.text.find("idle for") != std::string::npos) << after.text.substr(0, 3000);

    // The last hour (issue 54): the device's plot has tiny's and batch's reservations as steps with their
    // sources, the outside use, the refusal's mark; the queue's line and people's TTFT (tiny's stream) have
    // points. Drawn from /loch/history, which says the same.
    const json h = json::parse(loch.get("/loch/history").body);
    ASSERT_TRUE(h["devices"].contains("cpu")) << h.dump(1);
    std::set<std::string> history_expected;
    for (const auto& p : h["devices"]["cpu"])
        for (const auto& holder : p["holders"])
            if (holder["bytes"].get<std::uint64_t>() > 0)
                history_expected.insert(holder["name"].get<std::string>() + "/" +
                                        holder["source"].get<std::string>());
    EXPECT_TRUE(history_expected.contains("tiny/configured")) << h.dump(1);
    EXPECT_TRUE(history_expected.contains("batch/configured")) << h.dump(1);
    EXPECT_EQ(after.history_holders.at("cpu"), history_expected) << after.text.substr(0, 3000);
    EXPECT_TRUE(after.history_marks.contains("refused/huge")) << after.text.substr(0, 3000);
    EXPECT_EQ(after.history_marks.contains("evict/tiny"), evicted) << after.text.substr(0, 3000);
    EXPECT_GE(after.history_points.contains("waiting") ? after.history_points.at("waiting") : 0,
              4);  // 0 → 1 (batch waits) → 0, as steps
    EXPECT_GE(after.history_points.contains("TTFT p95") ? after.history_points.at("TTFT p95") : 0, 1)
        << h["ttft"].dump();
    ASSERT_FALSE(h["ttft"].empty());
    EXPECT_GE(h["ttft"][0]["n"].get<int>(), 1);
}

}  // namespace
}  // namespace loch::itest

namespace loch::itest {
namespace {

TEST_F(Observe, SighupServesTheNewConfigOrReportsItsProblemWithFileAndLineAndKeepsTheOld) {
    const auto yaml = [&](const std::string& entries) { return config(dir, "2GiB", entries, global()); };
    LochServer loch(dir.path(), yaml(model_entry("demo", models().demo.path(), kArgs)));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("demo", false, 4)).status, 200);
    const auto hangup_and_wait = [&](const std::string& marker) {
        const auto before = loch.log().size();
        ::kill(loch.process().pid(), SIGHUP);
        for (int i = 0; i < 200; ++i) {
            const auto log = loch.log();
            if (log.find(marker, before) != std::string::npos) return log.substr(before);
            std::this_thread::sleep_for(50ms);
        }
        return loch.log().substr(before);
    };
    // A bad edit: reported with file:line, and the old config keeps serving.
    std::ofstream(dir.path() / "loch.yaml") << "models:\n  - name: demo\n    pathh: /nowhere\n";
    auto log = hangup_and_wait("SIGHUP: the new config is not valid");
    EXPECT_NE(log.find("loch.yaml:3"), std::string::npos) << log;
    EXPECT_EQ(loch.post("/v1/chat/completions", chat("demo", false, 4)).status, 200);
    // A good one: "demo" removed, "other" added — served at once, without a restart.
    std::ofstream(dir.path() / "loch.yaml") << yaml(model_entry("other", models().demo.path(), kArgs));
    log = hangup_and_wait("SIGHUP: now serving");
    EXPECT_NE(log.find(R"("added":["other"])"), std::string::npos) << log;
    EXPECT_NE(log.find(R"("removed":["demo"])"), std::string::npos) << log;
    EXPECT_EQ(loch.post("/v1/chat/completions", chat("other", false, 4)).status, 200);
    EXPECT_EQ(loch.post("/v1/chat/completions", chat("demo", false, 4)).status, 404);
    for (int i = 0; i < 100 && loch.engine_status("demo").is_object() && !loch.engine_status("demo").empty();
         ++i)
        std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(loch.engine_status("demo").empty())
        << loch.status().dump(1);  // its engine stopped, gone from status
}

}  // namespace
}  // namespace loch::itest
