// A command engine's memory is measured, not guessed: a server whose memory grows after start (a test double,
// tests/doubles/growing_server.py) is reserved what it really holds, its growth evicts an idle neighbour when
// another model needs the room, and what it grew to is remembered across a restart of loch (source
// `measured-earlier`). Real `loch serve`; each case ends with loch's health checks.
#include <thread>

#include <gtest/gtest.h>

#include "core/memory.hpp"
#include "fixtures.hpp"

namespace loch::itest {
namespace {

std::string grower(const std::string& name, int grow_mib, int max_mib, const std::string& memory,
                   const std::string& routes = "") {
    return "  - name: " + name + "\n    engine: command\n    memory: " + memory +
           "\n    command:\n      argv: [python3, " +
           (fs::path(LOCH_SOURCE_DIR) / "tests/doubles/growing_server.py").string() + ", \"{port}\", \"" +
           std::to_string(grow_mib) + "\", \"" + std::to_string(max_mib) + "\"]\n" +
           (routes.empty() ? "" : "      routes: " + routes + "\n");
}

std::uint64_t reserved(LochServer& loch, const std::string& model) {
    const auto e = loch.engine_status(model);
    return e.contains("reservation") ? e["reservation"]["bytes"].get<std::uint64_t>() : 0;
}

TEST(MeasuredMemory, AGrowingServerIsReservedWhatItHoldsAndItsGrowthEvictsAnIdleNeighbourAndIsRemembered) {
    test::TempDir dir{"loch-itest-measured"};
    const std::string cfg =
        config(dir, "640MiB",
               grower("tts", 100, 300, "40MiB", "[/v1/audio/speech, /v1/chat/completions]") +
                   grower("caption", 10, 10, "350MiB"));
    {
        LochServer loch(dir.path(), cfg);
        for (int i = 0; i < 2; ++i)
            ASSERT_EQ(loch.post("/v1/chat/completions", chat("tts", false, 4)).status, 200);
        // A speech server's own route, configured: its audio bytes come back as they are, with their type.
        const auto speech = loch.post("/v1/audio/speech", R"({"model":"tts","input":"hello","voice":"a"})");
        ASSERT_EQ(speech.status, 200) << speech.body;
        EXPECT_EQ(speech.body, "RIFF....WAVE");
        // A route it was not given is refused before it starts anything (caption serves the text routes).
        EXPECT_EQ(loch.post("/v1/audio/speech", R"({"model":"caption","input":"hello"})").status, 400);
        // The per-process measurement (RSS of its process group) catches up within a few ticks.
        std::uint64_t r = 0;
        for (int i = 0; i < 50 && r < 300 * loch::kMiB; ++i) {
            std::this_thread::sleep_for(200ms);
            r = reserved(loch, "tts");
        }
        EXPECT_GE(r, 300 * loch::kMiB)
            << "declared 40 MiB, holds 300+: " << loch.engine_status("tts").dump(1);
        EXPECT_EQ(loch.engine_status("tts")["reservation"]["source"], "measured");

        // 350 MiB for the caption server does not fit beside the grown one (640 MiB budget): the idle tts
        // engine is evicted for it — by its measured size, not the 40 MiB it declared.
        ASSERT_EQ(loch.post("/v1/chat/completions", chat("caption", false, 4)).status, 200) << loch.log();
        const auto st = loch.status();
        bool evicted = false;
        for (const auto& ev : st["events"]) evicted |= ev["kind"] == "evict" && ev["model"] == "tts";
        EXPECT_TRUE(evicted) << st["events"].dump(1);
    }
    // A new loch on the same state dir: the next admission of tts reserves what it grew to before.
    LochServer again(dir.path(), cfg);
    ASSERT_EQ(again.post("/v1/chat/completions", chat("tts", false, 4)).status, 200);
    const auto e = again.engine_status("tts");
    EXPECT_GE(e["reservation"]["bytes"].get<std::uint64_t>(), 300 * loch::kMiB) << e.dump(1);
    EXPECT_EQ(e["reservation"]["source"], "measured-earlier") << e.dump(1);
    EXPECT_TRUE(fs::exists(dir.path() / "state" / "footprints.json"));
}

}  // namespace
}  // namespace loch::itest
