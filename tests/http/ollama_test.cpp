// Ollama's listing shapes over the broker's status.
#include <gtest/gtest.h>

#include "http/ollama.hpp"
#include "http/router.hpp"

namespace loch::http {
namespace {

const nlohmann::json kStatus = nlohmann::json::parse(R"({"engines": [
  {"name": "chat", "state": "ready", "device": "nvidia:0", "keep_alive_s": 300, "idle_s": 100,
   "reservation": {"bytes": 5368709120, "source": "measured"}},
  {"name": "cpu-one", "state": "ready", "device": "cpu", "reservation": {"bytes": 1024, "source": "formula"}},
  {"name": "idle", "state": "stopped", "footprint": {"needs": [{"device": "nvidia:0", "bytes": 2048}]},
   "file": {"bytes": 4920734112, "format": "gguf", "architecture": "llama", "parameter_count": 8030261248,
            "quantization": "Q4_K_M", "context_length": 131072, "embedding": false}},
  {"name": "embed", "state": "stopped", "file": {"bytes": 1000, "architecture": "nomic-bert", "embedding": true}}
]})");

TEST(Ollama, TagsListEveryModelAndPsTheRunningOnesWithTheirMemoryAndExpiry) {
    const auto now = std::chrono::system_clock::from_time_t(1764547200);  // 2025-12-01T00:00:00Z
    const auto tags = ollama_models(kStatus, false, now);
    ASSERT_EQ(tags["models"].size(), 4u);
    EXPECT_EQ(tags["models"][0]["name"], "chat");
    EXPECT_EQ(tags["models"][0]["model"], "chat");
    // Issue 27: /api/tags lists the file's size (Ollama's meaning), whether it runs or not, and its details.
    EXPECT_EQ(tags["models"][2]["size"], 4920734112ull);
    const auto& d = tags["models"][2]["details"];
    EXPECT_EQ(d["family"], "llama");
    EXPECT_EQ(d["families"], nlohmann::json::array({"llama"}));
    EXPECT_EQ(d["parameter_size"], "8.0B");
    EXPECT_EQ(d["quantization_level"], "Q4_K_M");
    const auto ps = ollama_models(kStatus, true, now);
    ASSERT_EQ(ps["models"].size(), 2u);
    EXPECT_EQ(ps["models"][0]["size"], 5368709120ull);
    EXPECT_EQ(ps["models"][0]["size_vram"], 5368709120ull);
    EXPECT_EQ(ps["models"][0]["expires_at"], "2025-12-01T00:03:20Z");     // keep_alive 300 s − idle 100 s
    EXPECT_EQ(ps["models"][1]["size_vram"], 0);                           // on the CPU
    EXPECT_GT(ps["models"][1]["expires_at"].get<std::string>(), "2100");  // forever
    EXPECT_EQ(ollama_models(nlohmann::json::object(), true)["models"].size(), 0u);
}

TEST(Ollama, ShowSaysContextLengthAndWhetherItEmbeds) {
    const auto& chat = kStatus["engines"][2];
    EXPECT_EQ(ollama_model_info(chat)["llama.context_length"], 131072);
    EXPECT_EQ(ollama_model_info(chat)["general.architecture"], "llama");
    EXPECT_EQ(ollama_capabilities(chat), nlohmann::json::array({"completion"}));
    EXPECT_EQ(ollama_capabilities(kStatus["engines"][3]), nlohmann::json::array({"embedding"}));
    EXPECT_EQ(ollama_error_body("no model named 'x'", "model_not_found", {})["error"], "no model named 'x'");
}

TEST(Ollama, RoutesAndModelById) {
    EXPECT_EQ(route("GET", "/api/tags").kind, Route::Kind::ollama_tags);
    EXPECT_EQ(route("GET", "/api/ps").kind, Route::Kind::ollama_ps);
    EXPECT_EQ(route("GET", "/api/version").kind, Route::Kind::ollama_version);
    EXPECT_EQ(route("POST", "/api/pull").kind, Route::Kind::ollama_pull);
    EXPECT_EQ(route("GET", "/api/pull").kind, Route::Kind::method_not_allowed);
    const auto m = route("GET", "/v1/models/org/model");
    EXPECT_EQ(m.kind, Route::Kind::model);
    EXPECT_EQ(m.engine, "org/model");
    EXPECT_EQ(route("GET", "/v1/models/").kind, Route::Kind::not_found);
}

}  // namespace
}  // namespace loch::http
