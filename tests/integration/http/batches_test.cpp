// The Batch API's batches against a real `loch serve` and real llama-server engines (issue 29): OpenAI's own
// Python client runs a 1,000-item batch of mixed routes to the end and cancels another; loch killed with
// SIGKILL mid-batch resumes it after a restart with every custom_id exactly once in the output; a running
// item is preempted for a person's request and runs again.
#include <signal.h>

#include <set>
#include <thread>

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include "batch_fixtures.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const std::string kTwoSlots = "    args:\n      ctx: 4096\n      parallel: 2\n      threads: 1\n";

std::string models_yaml() {
    return model_entry("tiny", models().tiny.path(), kTwoSlots) +
           model_entry("embed", models().demo.path(),
                       kArgs + "      extra: [--embeddings, --pooling, mean]\n");
}

// `n` items of several seconds each on long_model() (3,000 tokens, no EOS).
std::string long_items(const std::string& prefix, int n) {
    std::string text;
    for (int i = 0; i < n; ++i)
        text += batch_line(prefix + std::to_string(i), "/v1/chat/completions",
                           json::parse(chat("tiny", false, 3000, R"({"ignore_eos":true})"))) +
                "\n";
    return text;
}

}  // namespace

TEST(Batches, TheOpenAIClientRunsAThousandItemsOfMixedRoutesToTheEnd) {
    test::TempDir dir("loch-itest-batches");
    LochServer loch(dir.path(), config(dir, "2GiB", models_yaml()));
    std::string text;
    for (int i = 0; i < 1000; ++i) {
        const std::string id = "item-" + std::to_string(i);
        if (i == 500 || i == 501)  // a body the route refuses: 400, in the error file
            text += batch_line(id, "/v1/chat/completions", {{"model", "tiny"}, {"messages", 5}});
        else if (i % 3 == 0)
            text += chat_item(id, "tiny");
        else if (i % 3 == 1)
            text += batch_line(id, "/v1/completions",
                               {{"model", "tiny"}, {"prompt", "A photo of"}, {"max_tokens", 4}});
        else
            text += batch_line(id, "/v1/embeddings",
                               {{"model", "embed"}, {"input", "photo " + std::to_string(i)}});
        text += "\n";
    }
    const auto input = write_file(dir, "mixed.jsonl", text);
    const auto [rc, out] = run(
        python(), {peer("openai_batches.py").string(), std::to_string(loch.port()), "run", input.string()},
        dir.path() / "openai-batches.log", 900s);
    ASSERT_EQ(rc, 0) << out << loch.log();
    const auto seen = last_json_line(out);
    ASSERT_TRUE(seen.is_object()) << out;
    EXPECT_EQ(seen["counts"], json({{"total", 1000}, {"completed", 998}, {"failed", 2}})) << seen["counts"];
    std::set<std::string> ids(seen["output"].begin(), seen["output"].end());
    EXPECT_EQ(ids.size(), 998u);
    EXPECT_EQ(seen["output"].size(), 998u) << "an item appears twice in the output";
    EXPECT_EQ(seen["objects"], json::array({"chat.completion", "list", "text_completion"}))
        << seen["objects"];
    ASSERT_EQ(seen["errors"].size(), 2u) << seen["errors"];
    for (const auto& e : seen["errors"]) {
        EXPECT_EQ(e["status_code"], 400) << e;
        EXPECT_EQ(e["code"], "invalid_request") << e;
    }
    // Its progress while it ran is in the loch field: measured throughput.
    EXPECT_GT(seen["loch"].value("items_per_minute_overall", 0.0), 0.0) << seen["loch"];
}

TEST(Batches, ACancelledBatchEndsWithTheFinishedItemsInTheOutputAndTheRestMarkedCancelled) {
    test::TempDir dir("loch-itest-batches");
    LochServer loch(dir.path(), config(dir, "2GiB", models_yaml()));
    std::string text;
    for (int i = 0; i < 300; ++i) text += chat_item("c" + std::to_string(i), "tiny", "", 32) + "\n";
    const auto input = write_file(dir, "cancel.jsonl", text);
    const auto [rc, out] = run(
        python(), {peer("openai_batches.py").string(), std::to_string(loch.port()), "cancel", input.string()},
        dir.path() / "openai-batches.log", 600s);
    ASSERT_EQ(rc, 0) << out << loch.log();
    const auto seen = last_json_line(out);
    ASSERT_TRUE(seen.is_object()) << out;
    EXPECT_EQ(seen["conflict"], "conflict");
    EXPECT_NE(seen["wrong_file"].get<std::string>().find("not a batch input file"), std::string::npos)
        << seen;
    // Every item once: answered (output) or never run (error file, batch_cancelled).
    std::set<std::string> all(seen["output"].begin(), seen["output"].end());
    all.insert(seen["unfinished"].begin(), seen["unfinished"].end());
    EXPECT_EQ(all.size(), 300u);
    EXPECT_EQ(seen["output"].size() + seen["unfinished"].size(), 300u) << seen;
    EXPECT_GE(seen["output"].size(), 1u);
    EXPECT_GE(seen["unfinished"].size(), 1u);
    EXPECT_TRUE(loch.get("/loch/requests").body.find("batch_") == std::string::npos)
        << "an item of the cancelled batch is still in flight";
}

TEST(Batches, KilledMidBatchThenStoppedLochResumesItAndEveryCustomIdIsInTheOutputExactlyOnce) {
    test::TempDir dir("loch-itest-batches");
    const auto cfg = config(dir, "2GiB", models_yaml());
    std::optional<LochServer> loch;
    loch.emplace(dir.path(), cfg);
    std::string text;
    for (int i = 0; i < 200; ++i) text += chat_item("k" + std::to_string(i), "tiny", "", 24) + "\n";
    const std::string id = create_batch(*loch, text);
    const auto mid = poll(*loch, id, [](const json& b) { return b["request_counts"]["completed"] >= 40; });
    ASSERT_LT(mid["request_counts"]["completed"].get<int>(), 200) << "the batch ended before the kill";
    // Its progress, where a person looks: the batch's loch field, /loch/status, /metrics.
    EXPECT_GE(mid["loch"].value("done", 0), 40) << mid;
    const auto st = loch->status()["batches"];
    ASSERT_EQ(st.size(), 1u) << st;
    EXPECT_EQ(st[0]["id"], id);
    EXPECT_EQ(st[0]["total"], 200);
    const auto metrics = loch->get("/metrics").body;
    EXPECT_NE(metrics.find("loch_batch_items{batch=\"" + id + "\",state=\"done\"}"), std::string::npos)
        << metrics;
    // Killed while an item is recorded as running (what the restart must say it runs again): loch stopped
    // first, its store read as a crash would leave it, and let go on a moment when nothing runs — between one
    // item's end and the next one's start the store holds no running item.
    const auto store = dir.path() / "state" / "batches" / "batches.sqlite3";
    const auto pid = loch->process().pid();
    bool running = false;
    for (int i = 0; i < 500 && !running; ++i) {
        ::kill(pid, SIGSTOP);
        try {
            SQLite::Database db(store.string(), SQLite::OPEN_READONLY);
            running = db.execAndGet("SELECT count(*) FROM items WHERE state='running'").getInt() > 0;
        } catch (const SQLite::Exception&) {  // busy at that instant: look again
        }
        if (!running) {
            ::kill(pid, SIGCONT);
            std::this_thread::sleep_for(2ms);
        }
    }
    ASSERT_TRUE(running) << "no item was ever seen running";
    ::kill(pid, SIGKILL);
    loch->expect_exit();
    const auto port = loch->port();
    loch.reset();
    loch.emplace(dir.path(), cfg, std::vector<std::string>{}, port);
    EXPECT_NE(loch->log().find("run again"), std::string::npos) << "the restart did not say what it re-ran";
    // Then a clean stop mid-batch (SIGTERM: loch exits 0, what ran is requeued without an attempt) and
    // one more start: still every item exactly once, none failed for having been stopped twice.
    const auto later = poll(*loch, id, [](const json& b) { return b["request_counts"]["completed"] >= 100; });
    ASSERT_LT(later["request_counts"]["completed"].get<int>(), 200) << "the batch ended before the stop";
    loch.reset();
    loch.emplace(dir.path(), cfg, std::vector<std::string>{}, port);
    const auto done = poll(*loch, id, ended);
    EXPECT_EQ(done["status"], "completed") << done;
    EXPECT_EQ(done["request_counts"], json({{"total", 200}, {"completed", 200}, {"failed", 0}}));
    const auto out = file_lines(*loch, done["output_file_id"]);
    std::multiset<std::string> ids;
    for (const auto& o : out) ids.insert(o["custom_id"].get<std::string>());
    for (int i = 0; i < 200; ++i)
        EXPECT_EQ(ids.count("k" + std::to_string(i)), 1u) << "k" << i << " is not in the output exactly once";
    EXPECT_EQ(out.size(), 200u);
    EXPECT_TRUE(done["error_file_id"].is_null()) << done;
}

TEST(Batches, ARunningItemIsPreemptedForAPersonAndRunsAgain) {
    test::TempDir dir("loch-itest-batches");
    // One slot, long items: without preemption a person's request would wait for the item to finish.
    LochServer loch(dir.path(), config(dir, "2GiB", long_model()));
    const std::string id = create_batch(loch, long_items("long", 4));
    // Until an item runs on the engine.
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (std::chrono::steady_clock::now() < deadline &&
           loch.get("/loch/requests").body.find("\"running\"") == std::string::npos)
        std::this_thread::sleep_for(50ms);
    std::this_thread::sleep_for(300ms);
    const auto t0 = std::chrono::steady_clock::now();
    const auto person = loch.post("/v1/chat/completions", chat("tiny", false, 8));
    const double person_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(person.status, 200) << person.body;
    const auto done = poll(loch, id, ended);
    EXPECT_EQ(done["status"], "completed") << done;
    EXPECT_EQ(done["request_counts"]["completed"], 4);
    const auto out = file_lines(loch, done["output_file_id"]);
    EXPECT_EQ(out.size(), 4u);
    // The item's time, from the request log: the person waited far less than one item takes.
    double item_s = 0;
    {
        std::ifstream log(dir.path() / "state" / "logs" / "requests.jsonl");
        for (std::string l; std::getline(log, l);) {
            const auto r = json::parse(l, nullptr, false);
            if (r.is_object() && r.value("status", 0) == 200 && r.value("id", "").starts_with(id))
                item_s = std::max(item_s, r.value("duration_s", 0.0));
        }
    }
    EXPECT_GT(item_s, 0.0) << "no batch item in the request log";
    EXPECT_LT(person_s, 0.5 * item_s)
        << "the person waited for the batch item (" << person_s << " s; an item takes " << item_s << " s)";
    EXPECT_NE(loch.log().find("preempted for an interactive request"), std::string::npos) << loch.log();
}

// Chat and text completion items go to the engine streamed (so that a preempted one stops within a token)
// and are put together again: each answer in the output file is what the same request gets non-streamed.
TEST(Batches, AStreamedItemsAnswerIsTheSameAsTheEnginesNonStreamedOne) {
    test::TempDir dir("loch-itest-batches");
    LochServer loch(dir.path(), config(dir, "2GiB", models_yaml()));
    const std::vector<std::pair<std::string, json>> items = {
        {"/v1/chat/completions", json::parse(chat("tiny", false, 12))},
        {"/v1/chat/completions",
         json::parse(chat("tiny", false, 6, R"({"logprobs":true,"top_logprobs":2,"n":1})"))},
        {"/v1/chat/completions", json::parse(chat("tiny", false, 200, R"({"stop":["."]})"))},
        {"/v1/completions",
         {{"model", "tiny"}, {"prompt", "Once upon a time"}, {"max_tokens", 9}, {"temperature", 0}}},
    };
    std::string text;
    for (std::size_t i = 0; i < items.size(); ++i)
        text += batch_line("same-" + std::to_string(i), items[i].first, items[i].second) + "\n";
    const auto done = poll(loch, create_batch(loch, text), ended);
    ASSERT_EQ(done["status"], "completed") << done;
    const auto out = file_lines(loch, done["output_file_id"]);
    ASSERT_EQ(out.size(), items.size());
    for (const auto& line : out) {
        const std::size_t i = std::stoul(line["custom_id"].get<std::string>().substr(5));
        const json& got = line["response"]["body"];
        EXPECT_EQ(line["response"]["status_code"], 200) << line;
        const auto direct = loch.post(items[i].first, items[i].second.dump());
        ASSERT_EQ(direct.status, 200) << direct.body;
        const json want = json::parse(direct.body);
        SCOPED_TRACE(items[i].second.dump());
        EXPECT_EQ(got["object"], want["object"]);
        EXPECT_EQ(got["model"], want["model"]);
        EXPECT_EQ(got["usage"]["prompt_tokens"], want["usage"]["prompt_tokens"]) << got;
        EXPECT_EQ(got["usage"]["completion_tokens"], want["usage"]["completion_tokens"]) << got;
        ASSERT_EQ(got["choices"].size(), want["choices"].size()) << got;
        const json& g = got["choices"][0];
        const json& w = want["choices"][0];
        EXPECT_EQ(g["finish_reason"], w["finish_reason"]);
        if (items[i].first == "/v1/completions") {
            EXPECT_EQ(g["text"], w["text"]);
            continue;
        }
        EXPECT_EQ(g["message"], w["message"]);
        EXPECT_EQ(g.contains("logprobs"), w.contains("logprobs")) << g;
        if (w.contains("logprobs") && w["logprobs"].is_object()) {
            ASSERT_EQ(g["logprobs"]["content"].size(), w["logprobs"]["content"].size()) << g;
            for (std::size_t t = 0; t < w["logprobs"]["content"].size(); ++t)
                EXPECT_EQ(g["logprobs"]["content"][t]["token"], w["logprobs"]["content"][t]["token"]);
        }
    }
}

TEST(Batches, ABatchPastItsCompletionWindowExpiresWithTheUnfinishedItemsInTheErrorFile) {
    test::TempDir dir("loch-itest-batches");
    LochServer loch(dir.path(), config(dir, "2GiB", long_model()));
    const auto file = upload_id(loch, long_items("slow", 3));
    // A bad window is refused before anything is recorded; a short one is taken.
    const auto bad = loch.post(
        "/v1/batches",
        json{{"input_file_id", file}, {"endpoint", "/v1/chat/completions"}, {"completion_window", "soon"}}
            .dump());
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.body.find("completion_window"), std::string::npos) << bad.body;
    const auto bad_limit = loch.get("/v1/batches?limit=many");
    EXPECT_EQ(bad_limit.status, 400) << bad_limit.body;
    EXPECT_NE(bad_limit.body.find("is not a whole number from 1 to 100"), std::string::npos)
        << bad_limit.body;
    const auto created = loch.post(
        "/v1/batches",
        json{{"input_file_id", file}, {"endpoint", "/v1/chat/completions"}, {"completion_window", "2s"}}
            .dump());
    ASSERT_EQ(created.status, 200) << created.body;
    const std::string id = json::parse(created.body)["id"];
    const auto done = poll(loch, id, ended, 120s);
    EXPECT_EQ(done["status"], "expired") << done;
    EXPECT_TRUE(done["expired_at"].is_number()) << done;
    const auto errors = file_lines(loch, done["error_file_id"]);
    const auto out = file_lines(loch, done["output_file_id"]);
    EXPECT_EQ(errors.size() + out.size(), 3u);
    ASSERT_GE(errors.size(), 1u) << done;
    for (const auto& e : errors) EXPECT_EQ(e["error"]["code"], "batch_expired") << e;
    EXPECT_EQ(loch.get("/loch/requests").body.find(id), std::string::npos)
        << "an expired batch's item still runs";
}
