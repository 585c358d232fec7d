// Metrics: requests are counted per model/route/outcome; the broker snapshot becomes gauges and counters in
// the text format (what prometheus_client parses is checked end to end in itest_http).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "observe/metrics.hpp"
#include "observe/request_record.hpp"

using namespace loch::observe;

namespace {
RequestRecord done(const std::string& model, const std::string& error = "") {
    RequestRecord r;
    r.model = model;
    r.route = "/v1/chat/completions";
    r.priority = "interactive";
    r.duration_s = 1.5;
    r.ttft_s = 0.5;
    r.completion_tokens = 11;
    r.error_type = error;
    return r;
}
}  // namespace

TEST(Metrics, CountsRequestsByOutcomeAndHidesUnknownModelNames) {
    Metrics m;
    m.record(done("chat"));
    m.record(done("chat"));
    m.record(done("typo", "model_not_found"));
    const auto text = m.exposition(nlohmann::json::object());
    EXPECT_NE(text.find(R"(loch_requests_total{model="chat",outcome="ok",route="/v1/chat/completions"} 2)"),
              std::string::npos)
        << text;
    EXPECT_NE(
        text.find(
            R"(loch_requests_total{model="-",outcome="model_not_found",route="/v1/chat/completions"} 1)"),
        std::string::npos)
        << text;
    EXPECT_EQ(text.find("typo"), std::string::npos);
    const auto s = m.summary();
    EXPECT_EQ(s["chat"]["count"], 2);
    EXPECT_DOUBLE_EQ(s["chat"]["tokens_per_s_avg"].get<double>(), 10.0);  // 10 tokens after the first in 1 s
}

// The dashboard's speed column was empty for image models: they have no tokens. Their seconds per step (and
// a speech model's real-time factor, and every model's seconds per request) are in the summary it reads.
TEST(Metrics, TheSummaryHasASpeedForModelsWithoutTokens) {
    Metrics m;
    auto image = done("flux");
    image.completion_tokens.reset();
    image.ttft_s.reset();
    image.seconds_per_step = 1.5;
    image.duration_s = 40;
    m.record(image);
    image.seconds_per_step = 2.5;
    image.duration_s = 60;
    m.record(image);
    auto speech = done("whisper");
    speech.completion_tokens.reset();
    speech.ttft_s.reset();
    speech.real_time_factor = 0.2;
    m.record(speech);
    const auto s = m.summary();
    EXPECT_DOUBLE_EQ(s["flux"]["seconds_per_step_avg"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(s["flux"]["duration_s_avg"].get<double>(), 50.0);
    EXPECT_FALSE(s["flux"].contains("tokens_per_s_avg"));
    EXPECT_DOUBLE_EQ(s["whisper"]["real_time_factor_avg"].get<double>(), 0.2);
}

TEST(Metrics, TheBrokerSnapshotBecomesVllmGaugesAndCounters) {
    const auto status = nlohmann::json::parse(R"({
      "devices":[{"device":"cpu","total":{"bytes":1000,"source":"measured"},"reserve":{"bytes":0},
                  "driver_reserved":{"bytes":0},"capacity_bytes":900,"outside_bytes":50,"own_bytes":400,
                  "free_bytes":450,"reservations":[{"engine":"chat","figure":{"bytes":400,"source":"formula"},
                  "loading":false}]}],
      "engines":[{"name":"chat","state":"ready","active_requests":1,"slots":4,
                  "counters":{"loads_ok":2,"loads_failed":1,"load_seconds_total":3.0,"evictions":1,
                              "exits":{"signal":1}}},
                 {"name":"code","state":"ready","active_requests":2,"slots":4},
                 {"name":"draw","state":"loading","active_requests":0,"slots":1},
                 {"name":"tts","state":"stopped","active_requests":0,"slots":1,"fits_now":true},
                 {"name":"huge","state":"stopped","active_requests":0,"slots":1,"fits_now":false}],
      "queue":{"interactive":3,"batch":0,"waiting":[{"model":"chat"},{"model":"chat"},{"model":"draw"}]}})");
    const auto text = Metrics().exposition(status);
    for (
        const char* want :
        {// The box as one vLLM server: one series per name, no labels.
         "vllm:num_requests_running 3\n", "vllm:num_requests_waiting 3\n",
         "vllm:kv_cache_usage_perc 0.375\n",  // 3 of the ready engines' 8 slots
         R"(vllm:lora_requests_info{max_lora="3",running_lora_adapters="chat,code",waiting_lora_adapters="draw"} )",
         R"(loch_device_memory_free_bytes{device="cpu"} 450)",
         // Per model under loch's own names.
         R"(loch_model_requests_running{model="chat"} 1)", R"(loch_model_requests_waiting{model="chat"} 2)",
         R"(loch_model_slot_usage_ratio{model="code"} 0.5)",
         R"(loch_reservation_bytes{device="cpu",loading="false",model="chat",source="formula"} 400)",
         R"(loch_engine_exits_total{exit_class="signal",model="chat"} 1)",
         R"(loch_engine_load_seconds_count{model="chat"} 2)", R"(loch_queue_depth{priority="interactive"} 3)",
         "# TYPE loch_engine_loads_total counter"})
        EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
    EXPECT_EQ(text.find("model_name="), std::string::npos) << "no per-model vllm: series: " << text;
}

TEST(RequestRecord, ClientIdsAreCheckedBeforeTheyAreLoggedOrEchoed) {
    EXPECT_EQ(checked_request_id("abc-123_x.y"), "abc-123_x.y");
    EXPECT_FALSE(checked_request_id("a b"));
    EXPECT_FALSE(checked_request_id("x\r\nSet-Cookie: 1"));
    EXPECT_FALSE(checked_request_id(std::string(65, 'a')));
    EXPECT_FALSE(checked_request_id(""));
}
