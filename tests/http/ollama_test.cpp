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
  {"name": "idle", "state": "stopped", "footprint": {"needs": [{"device": "nvidia:0", "bytes": 2048}]}}
]})");

TEST(Ollama, TagsListEveryModelAndPsTheRunningOnesWithTheirMemoryAndExpiry) {
    const auto now = std::chrono::system_clock::from_time_t(1764547200);  // 2025-12-01T00:00:00Z
    const auto tags = ollama_models(kStatus, false, now);
    ASSERT_EQ(tags["models"].size(), 3u);
    EXPECT_EQ(tags["models"][0]["name"], "chat");
    EXPECT_EQ(tags["models"][0]["model"], "chat");
    EXPECT_EQ(tags["models"][2]["size"], 2048);  // not running: its planned need
    const auto ps = ollama_models(kStatus, true, now);
    ASSERT_EQ(ps["models"].size(), 2u);
    EXPECT_EQ(ps["models"][0]["size"], 5368709120ull);
    EXPECT_EQ(ps["models"][0]["size_vram"], 5368709120ull);
    EXPECT_EQ(ps["models"][0]["expires_at"], "2025-12-01T00:03:20Z");     // keep_alive 300 s − idle 100 s
    EXPECT_EQ(ps["models"][1]["size_vram"], 0);                           // on the CPU
    EXPECT_GT(ps["models"][1]["expires_at"].get<std::string>(), "2100");  // forever
    EXPECT_EQ(ollama_models(nlohmann::json::object(), true)["models"].size(), 0u);
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
