// Conversations that survive an eviction (issue 33; broker/saved_slots.hpp): `loch serve` with the real
// pinned llama-server. A long conversation's engine is evicted (another model needs the memory), the
// engine saves its slot first; when the conversation continues, the restarted engine gets the slot back and
// reads only the new turn (llama-server's own `timings.cache_n` says how many tokens it did not read). Never
// across a changed model file or setting; files beyond slot_save.max_disk go, the oldest first.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "fixtures.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// ~1.2 k tokens of the tiny model: far above min_tokens, well inside its 2048-token slot.
std::string long_text(const std::string& topic) {
    std::string t;
    for (int i = 0; i < 100; ++i) t += topic + std::to_string(i) + " is here ";
    return t;
}

json ask(LochServer& loch, const std::string& model, const json& messages) {
    const json body = {{"model", model}, {"messages", messages}, {"max_tokens", 8}, {"temperature", 0}};
    const auto r = loch.post("/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
}

// The answer's own account: tokens the engine took from its cache rather than reading them.
std::uint64_t cached(const json& answer) {
    return answer["timings"]["cache_n"].get<std::uint64_t>();
}

json continued(const json& first_messages, const json& answer, const std::string& next) {
    json m = first_messages;
    m.push_back({{"role", "assistant"}, {"content", answer["choices"][0]["message"]["content"]}});
    m.push_back({{"role", "user"}, {"content", next}});
    return m;
}

void wait_stopped(LochServer& loch, const std::string& model) {
    for (int i = 0; i < 200 && loch.engine_status(model)["state"] != "stopped"; ++i)
        std::this_thread::sleep_for(50ms);
    ASSERT_EQ(loch.engine_status(model)["state"], "stopped");
}

std::size_t files_in(const fs::path& slots, const std::string& ext) {
    std::size_t n = 0;
    if (!fs::exists(slots)) return 0;
    for (const auto& f : fs::recursive_directory_iterator(slots))
        if (f.path().extension() == ext) ++n;
    return n;
}

std::size_t events(LochServer& loch, const std::string& kind) {
    std::size_t n = 0;
    const json st = loch.status();  // (kept: a temporary in the loop head would dangle)
    for (const auto& e : st["events"])
        if (e["kind"] == kind) ++n;
    return n;
}

const std::string kTwoModelsOneAtATime = "    args:\n      ctx: 2048\n      parallel: 1\n      threads: 1\n";
const std::string kSaveSmall = "slot_save:\n  min_tokens: 64\n";

class Conversations : public ::testing::Test {
  protected:
    void SetUp() override { (void)models(); }
    test::TempDir dir{"loch-itest-conversations"};
    fs::path slots() const { return dir.path() / "state" / "slots"; }
    // Each model alone fits the budget; both do not (the tiny models reserve ~80 MiB each).
    std::string two_models(const std::string& global, const std::string& args = kTwoModelsOneAtATime) {
        return config(dir, "120MiB",
                      model_entry("chat", models().tiny.path(), args) +
                          model_entry("other", models().tiny2.path(), kTwoModelsOneAtATime),
                      global);
    }
};

TEST_F(Conversations, AConversationEvictedByAnotherModelIsRestoredNotReReadWhenItContinues) {
    LochServer loch(dir.path(), two_models(kSaveSmall));
    const json first = json::array({{{"role", "user"}, {"content", long_text("apple")}}});
    const json a1 = ask(loch, "chat", first);
    const auto prompt1 = a1["usage"]["prompt_tokens"].get<std::uint64_t>();
    ASSERT_GT(prompt1, 1000u);

    // Another model needs the memory: chat is evicted, and saves its slot before it stops.
    ask(loch, "other", json::array({{{"role", "user"}, {"content", "hello"}}}));
    wait_stopped(loch, "chat");
    EXPECT_EQ(events(loch, "slots_saved"), 1u) << loch.status()["events"].dump(2);
    EXPECT_EQ(files_in(slots(), ".bin"), 1u);
    EXPECT_EQ(loch.status()["saved_slots"]["files"], 1);

    // The conversation goes on: the restarted engine reads only the new turn.
    const json a2 = ask(loch, "chat", continued(first, a1, "and then?"));
    EXPECT_GE(cached(a2), prompt1) << a2["timings"].dump();
    EXPECT_LT(a2["timings"]["prompt_n"].get<std::uint64_t>(), 100u) << a2["timings"].dump();
    EXPECT_EQ(events(loch, "slot_restored"), 1u);
    // The request's record says so (requests.jsonl, flushed within 100 ms).
    bool recorded = false;
    std::string all;
    for (int i = 0; i < 40 && !recorded; ++i, std::this_thread::sleep_for(50ms)) {
        std::ifstream log(dir.path() / "state" / "logs" / "requests.jsonl");
        all.assign(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
        recorded = all.find("\"restored_tokens\":" + std::to_string(prompt1 / 100)) != std::string::npos;
    }
    EXPECT_TRUE(recorded) << all;
    // A different conversation after the same eviction finds nothing to restore and is read as usual.
    ask(loch, "other", json::array({{{"role", "user"}, {"content", "hello again"}}}));
    wait_stopped(loch, "chat");
    const json fresh = ask(loch, "chat", json::array({{{"role", "user"}, {"content", long_text("pear")}}}));
    EXPECT_EQ(cached(fresh), 0u);
    EXPECT_EQ(events(loch, "slot_restored"), 1u);
}

// The clients of Anthropic's Messages API and OpenAI's Responses API (Claude Code, the Agents SDK) continue
// a conversation the same way: the probe and the rendering follow each API (llama_server.hpp:
// chat_messages_of), and each API's own usage says what the engine took from the restored slot.
TEST_F(Conversations, AnAnthropicAndAResponsesConversationAreRestoredAfterAnEvictionToo) {
    LochServer loch(dir.path(), two_models(kSaveSmall));
    const auto post = [&](const std::string& route, const json& body) {
        const auto r = loch.post(route, body.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        return json::parse(r.body);
    };
    const auto evict_chat = [&] {
        ask(loch, "other", json::array({{{"role", "user"}, {"content", "hello"}}}));
        wait_stopped(loch, "chat");
    };

    json messages = json::array({{{"role", "user"}, {"content", long_text("fig")}}});
    json body = {{"model", "chat"},
                 {"max_tokens", 8},
                 {"temperature", 0},
                 {"system", "Answer briefly."},
                 {"messages", messages}};
    const json m1 = post("/v1/messages", body);
    const auto read1 = m1["usage"]["input_tokens"].get<std::uint64_t>();
    ASSERT_GT(read1, 1000u) << m1.dump();
    evict_chat();
    ASSERT_EQ(events(loch, "slots_saved"), 1u);
    std::string said;
    for (const auto& block : m1["content"])
        if (block["type"] == "text") said += block["text"].get<std::string>();
    body["messages"].push_back({{"role", "assistant"}, {"content", said}});
    body["messages"].push_back({{"role", "user"}, {"content", "and then?"}});
    const json m2 = post("/v1/messages", body);
    EXPECT_GE(m2["usage"]["cache_read_input_tokens"].get<std::uint64_t>(), read1) << m2["usage"].dump();
    EXPECT_LT(m2["usage"]["input_tokens"].get<std::uint64_t>(), 100u) << m2["usage"].dump();
    EXPECT_EQ(events(loch, "slot_restored"), 1u);

    json input = json::array({{{"role", "user"}, {"content", long_text("kiwi")}}});
    json rbody = {{"model", "chat"},
                  {"max_output_tokens", 8},
                  {"temperature", 0},
                  {"instructions", "Answer briefly."},
                  {"input", input}};
    const json r1 = post("/v1/responses", rbody);
    const auto read2 = r1["usage"]["input_tokens"].get<std::uint64_t>();
    ASSERT_GT(read2, 1000u) << r1.dump();
    evict_chat();
    std::string answered;
    for (const auto& item : r1["output"])
        if (item["type"] == "message")
            for (const auto& part : item["content"])
                if (part["type"] == "output_text") answered += part["text"].get<std::string>();
    rbody["input"].push_back({{"type", "message"},
                              {"role", "assistant"},
                              {"content", json::array({{{"type", "output_text"}, {"text", answered}}})}});
    rbody["input"].push_back({{"role", "user"}, {"content", "and then?"}});
    const json r2 = post("/v1/responses", rbody);
    EXPECT_GE(r2["usage"]["input_tokens_details"]["cached_tokens"].get<std::uint64_t>(), read2)
        << r2["usage"].dump();
    EXPECT_EQ(events(loch, "slot_restored"), 2u);
}

// loch stopped (an upgrade, a reboot): its idle engines save their conversations before they stop, and the
// next loch restores them.
TEST_F(Conversations, AConversationSurvivesARestartOfLoch) {
    const json first = json::array({{{"role", "user"}, {"content", long_text("fig")}}});
    json a1;
    {
        LochServer loch(dir.path(), two_models(kSaveSmall));
        a1 = ask(loch, "chat", first);
        ASSERT_GT(a1["usage"]["prompt_tokens"].get<std::uint64_t>(), 1000u);
        EXPECT_EQ(files_in(slots(), ".bin"), 0u);
    }  // SIGTERM: loch saves, then stops the engine, and exits 0 (checked by LochServer)
    EXPECT_EQ(files_in(slots(), ".bin"), 1u);
    LochServer loch(dir.path(), two_models(kSaveSmall));
    const json a2 = ask(loch, "chat", continued(first, a1, "and then?"));
    EXPECT_GT(cached(a2), 1000u) << a2["timings"].dump();
    EXPECT_EQ(events(loch, "slot_restored"), 1u);
}

TEST_F(Conversations, SavedSlotsOutliveLochButNeverGoIntoAnEngineLaunchedWithOtherSettings) {
    const json first = json::array({{{"role", "user"}, {"content", long_text("plum")}}});
    json a1;
    {
        LochServer loch(dir.path(), two_models(kSaveSmall));
        a1 = ask(loch, "chat", first);
        const auto r = loch.post("/loch/models/chat/unload", "{}");  // an unload saves too
        ASSERT_EQ(r.status, 200) << r.body;
        wait_stopped(loch, "chat");
        ASSERT_EQ(files_in(slots(), ".bin"), 1u);
    }
    {
        // Another context size: another launch, so the file is not restored (and stays for its own launch).
        LochServer loch(dir.path(), two_models(kSaveSmall,
                                               "    args:\n      ctx: 1536\n      parallel: 1\n"
                                               "      threads: 1\n"));
        const json a2 = ask(loch, "chat", continued(first, a1, "and then?"));
        EXPECT_EQ(cached(a2), 0u) << a2["timings"].dump();
        EXPECT_EQ(events(loch, "slot_restored"), 0u);
    }
    {
        // The launch that wrote it, after a restart of loch: restored.
        LochServer loch(dir.path(), two_models(kSaveSmall));
        const json a3 = ask(loch, "chat", continued(first, a1, "and then?"));
        EXPECT_GT(cached(a3), 1000u) << a3["timings"].dump();
        EXPECT_EQ(events(loch, "slot_restored"), 1u);
    }
}

TEST_F(Conversations, AReplacedModelFileGetsNothingRestoredAndWhatTheOldFileSavedGoes) {
    const auto model = dir.path() / "chat.gguf";
    fs::copy_file(models().tiny.path(), model);
    const std::string yaml =
        config(dir, "512MiB", model_entry("chat", model, kTwoModelsOneAtATime), kSaveSmall);
    LochServer loch(dir.path(), yaml);
    const json first = json::array({{{"role", "user"}, {"content", long_text("fig")}}});
    const json a1 = ask(loch, "chat", first);
    ASSERT_EQ(loch.post("/loch/models/chat/unload", "{}").status, 200);
    wait_stopped(loch, "chat");
    ASSERT_EQ(files_in(slots(), ".bin"), 1u);
    // The same path, a new file (a re-download, a new quantization): its mtime differs.
    fs::last_write_time(model, fs::last_write_time(model) + 1h);
    const json a2 = ask(loch, "chat", continued(first, a1, "and then?"));
    EXPECT_EQ(cached(a2), 0u) << a2["timings"].dump();
    EXPECT_EQ(events(loch, "slot_restored"), 0u);
    EXPECT_EQ(files_in(slots(), ".bin"), 0u);  // emptied when the new file's engine was launched
    EXPECT_EQ(loch.status()["saved_slots"]["files"], 0);
}

TEST_F(Conversations, BeyondTheDiskLimitTheOldestSavedConversationGoes) {
    // One tiny conversation of ~1.2 k tokens is ~1.3 MB: the limit holds one, not two.
    LochServer loch(dir.path(), two_models("slot_save:\n  min_tokens: 64\n  max_disk: 2MB\n"));
    const json apple = json::array({{{"role", "user"}, {"content", long_text("apple")}}});
    const json pear = json::array({{{"role", "user"}, {"content", long_text("pear")}}});
    const json a = ask(loch, "chat", apple);
    ASSERT_EQ(loch.post("/loch/models/chat/unload", "{}").status, 200);
    wait_stopped(loch, "chat");
    const json p = ask(loch, "chat", pear);
    ASSERT_EQ(loch.post("/loch/models/chat/unload", "{}").status, 200);
    wait_stopped(loch, "chat");
    EXPECT_EQ(files_in(slots(), ".bin"), 1u);
    EXPECT_EQ(files_in(slots(), ".json"), 1u);
    EXPECT_LE(loch.status()["saved_slots"]["bytes"].get<std::uint64_t>(), 2'000'000u);
    // The newer one is kept and restored; the older one was dropped.
    EXPECT_GT(cached(ask(loch, "chat", continued(pear, p, "more?"))), 1000u);
    ASSERT_EQ(loch.post("/loch/models/chat/unload", "{}").status, 200);
    wait_stopped(loch, "chat");
    EXPECT_EQ(cached(ask(loch, "chat", continued(apple, a, "more?"))), 0u);
}

TEST_F(Conversations, TurnedOffTheEngineIsLaunchedWithoutSlotFilesAndNothingIsWritten) {
    LochServer loch(dir.path(), two_models("slot_save:\n  enabled: false\n"));
    const json first = json::array({{{"role", "user"}, {"content", long_text("kiwi")}}});
    ask(loch, "chat", first);
    EXPECT_EQ(loch.log().find("--slot-save-path"), std::string::npos);
    ASSERT_EQ(loch.post("/loch/models/chat/unload", "{}").status, 200);
    wait_stopped(loch, "chat");
    EXPECT_EQ(files_in(slots(), ".bin"), 0u);
    EXPECT_EQ(events(loch, "slots_saved"), 0u);
}

}  // namespace

namespace {

// Issue 51: llama.cpp can report a slot restore as done and then re-read the whole prompt (llama.cpp issues
// 26676, 28276). Here the restore "succeeds" with the wrong contents: the saved file of the conversation
// being continued is overwritten by the slot file of another conversation of the same model (same shape,
// so the engine loads it). The first answer's own figures (timings.cache_n, usage's cached_tokens) show the
// prompt was read again: the event is slot_restore_failed with the figures, /metrics counts it, and the
// request's record says restore_failed — never slot_restored.
TEST_F(Conversations, ARestoreTheAnswerDidNotUseIsReportedAsFailedNeverAsRestored) {
    LochServer loch(dir.path(), two_models(kSaveSmall));
    const json apple = json::array({{{"role", "user"}, {"content", long_text("apple")}}});
    const json a1 = ask(loch, "chat", apple);
    ASSERT_EQ(loch.post("/loch/models/chat/unload", "{}").status, 200);
    wait_stopped(loch, "chat");
    ASSERT_EQ(files_in(slots(), ".bin"), 1u);
    std::vector<fs::path> before;
    for (const auto& f : fs::recursive_directory_iterator(slots()))
        if (f.path().extension() == ".bin") before.push_back(f.path());
    // A second conversation, saved the same way.
    ask(loch, "chat", json::array({{{"role", "user"}, {"content", long_text("pear")}}}));
    ASSERT_EQ(loch.post("/loch/models/chat/unload", "{}").status, 200);
    wait_stopped(loch, "chat");
    ASSERT_EQ(files_in(slots(), ".bin"), 2u);
    fs::path pear;
    for (const auto& f : fs::recursive_directory_iterator(slots()))
        if (f.path().extension() == ".bin" && f.path() != before.at(0)) pear = f.path();
    ASSERT_FALSE(pear.empty());
    fs::copy_file(pear, before.at(0), fs::copy_options::overwrite_existing);  // apple's file holds pear now

    const json a2 = ask(loch, "chat", continued(apple, a1, "and then?"));
    EXPECT_LT(cached(a2), 100u) << "the engine re-read the prompt: " << a2["timings"].dump();
    EXPECT_EQ(events(loch, "slot_restored"), 0u) << loch.status()["events"].dump(2);
    EXPECT_EQ(events(loch, "slot_restore_failed"), 1u) << loch.status()["events"].dump(2);
    json failed;
    const json st = loch.status();  // (kept: a temporary in the loop head would dangle)
    for (const auto& e : st["events"])
        if (e["kind"] == "slot_restore_failed") failed = e;
    EXPECT_GT(failed.value("tokens", 0u), 1000u) << failed.dump();
    EXPECT_LT(failed.value("cached_tokens", 9999u), 100u) << failed.dump();
    const auto metrics = loch.get("/metrics");
    EXPECT_NE(metrics.body.find("loch_slot_restores_total{model=\"chat\",outcome=\"failed\"} 1"),
              std::string::npos)
        << metrics.body.substr(0, 200);
    bool recorded = false;
    std::string all;
    for (int i = 0; i < 40 && !recorded; ++i, std::this_thread::sleep_for(50ms)) {
        std::ifstream log(dir.path() / "state" / "logs" / "requests.jsonl");
        all.assign(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
        recorded = all.find("\"restore_failed\":true") != std::string::npos;
    }
    EXPECT_TRUE(recorded) << all;
    EXPECT_EQ(all.find("\"restored_tokens\""), std::string::npos) << all;
}

}  // namespace
