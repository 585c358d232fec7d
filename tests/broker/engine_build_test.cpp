// A device no engine build reaches (a GPU with only CPU builds: a CPU llama-server exits at `--device CUDA0`)
// gets no model of that kind: the request is refused at once with the builds found and the setup command,
// nothing starts; with a build that reaches it, the same model starts there.
#include "broker_fixture.hpp"

namespace loch::broker {
namespace {

using namespace test_fixture;

class EngineBuildTest : public BrokerTest {
  protected:
    void builds(std::vector<std::string> backends) {
        for (const auto& b : backends)
            cfg.builds["command"].push_back({"/opt/loch/" + b + "/engine", b, "", "test"});
    }
};

TEST_F(EngineBuildTest, AGpuWithOnlyCpuBuildsIsRefusedAtOnceWithTheFixAndNothingStarts) {
    add_model("chat", 1 * kGiB);
    builds({"cpu"});
    start(fast());
    auto f = acquire("chat");
    ASSERT_TRUE(settle(f, 2s));
    const auto e = error_of(f);
    ASSERT_TRUE(e);
    EXPECT_NE(std::string(e->what()).find("no command build reaches nvidia:0 (cuda)"), std::string::npos)
        << e->what();
    EXPECT_NE(std::string(e->what()).find("bash scripts/setup.sh --backend cuda"), std::string::npos)
        << e->what();
    EXPECT_EQ(e->kind(), ErrorKind::engine_missing);  // 503, never retried here: another box may have one
    EXPECT_EQ(e->details()["builds"][0]["backend"], "cpu");
    EXPECT_TRUE(fake->runs.empty());
}

TEST_F(EngineBuildTest, ABuildForTheGpusBackendServesIt) {
    add_model("chat", 1 * kGiB);
    builds({"cpu", "cuda"});
    start(fast());
    auto f = acquire("chat");
    ASSERT_TRUE(settle(f, 2s));
    EXPECT_TRUE(f.get().valid());
    ASSERT_EQ(fake->runs.size(), 1u);
}

// A model that names no device (the embedded default's) runs on the CPU when no build reaches the GPU, as on
// a machine without one: the first command still answers, and the doctor names the GPU left unused.
TEST_F(EngineBuildTest, AModelThatNamesNoDeviceRunsOnTheCpuWhenNoBuildReachesTheGpu) {
    add_model("chat", 1 * kGiB);
    cfg.models.back().devices.clear();
    builds({"cpu"});
    start_on({fake_gpu(10 * kGiB), fake_cpu(16 * kGiB)}, fast());
    auto f = acquire("chat");
    ASSERT_TRUE(settle(f, 2s));
    EXPECT_TRUE(f.get().valid());
    ASSERT_EQ(fake->runs.size(), 1u);
    EXPECT_EQ(engine_status("chat")["device"], "cpu");
}

}  // namespace
}  // namespace loch::broker
