// An engine ended by a SIGKILL loch did not send is named from the memory cgroup's oom_kill counter, read at
// its launch and at its end (through the fake device source): the container's limit with the numbers, the
// kernel's OOM killer when there is no limit, and "not the OOM killer" when the counter did not move. A
// limit's kill on the CPU raises the model's figure, so the next start reserves what it really used.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>

#include "broker_fixture.hpp"

namespace loch::broker {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test_fixture::BrokerTest;
using test_fixture::fast;

devices::MemoryCgroup cgroup_v2(std::optional<std::uint64_t> limit, std::uint64_t current,
                                std::uint64_t kills) {
    devices::MemoryCgroup c;
    c.at = {2, "/sys/fs/cgroup", "/"};
    c.limit = limit;
    if (limit) c.limit_file = "/sys/fs/cgroup/memory.max";
    c.current = current;
    c.oom_kills = kills;
    c.oom_kills_file = "/sys/fs/cgroup/memory.events";
    return c;
}

class KillTest : public BrokerTest {
  protected:
    void start_cpu() {
        add_model("tts", 100 * kMiB);
        cfg.models.back().devices = {"cpu"};
        DeviceSnapshot cpu;
        cpu.id = "cpu";
        cpu.total = {2 * kGiB, Source::measured, "fake"};
        start_on({cpu}, fast());
    }
    // Serves one request, then the engine is killed from outside with the cgroup reading `after`.
    const engines::ExitReport& kill_with(std::optional<devices::MemoryCgroup> after) {
        auto lease = acquire("tts");
        EXPECT_TRUE(settle(lease));
        lease.get().release();
        cgroup = std::move(after);
        fake->of("tts").back()->killed_from_outside();
        run_for(30ms);
        return *fake->of("tts").back()->exit_report();
    }
    std::uint64_t reservation_now() {
        auto lease = acquire("tts");
        EXPECT_TRUE(settle(lease));
        auto status = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
        EXPECT_TRUE(settle(status));
        const auto j = status.get();
        for (const auto& e : j["engines"])
            if (e["name"] == "tts") return e["reservation"]["bytes"].get<std::uint64_t>();
        ADD_FAILURE() << j.dump();
        return 0;
    }
};

TEST_F(KillTest, AKillUnderAContainerLimitIsNamedWithTheLimitTheCounterAndWhatItUsed) {
    cgroup = cgroup_v2(512 * kMiB, 60 * kMiB, 3);
    start_cpu();
    const auto& r = kill_with(cgroup_v2(512 * kMiB, 20 * kMiB, 4));
    EXPECT_EQ(r.kind, engines::ExitKind::out_of_memory);
    EXPECT_NE(r.summary.find("killed by the container's memory limit 512.0 MiB (oom_kill 3→4, "
                             "/sys/fs/cgroup/memory.max); it used about 492.0 MiB against a 100.0 MiB "
                             "reservation"),
              std::string::npos)
        << r.summary;
    EXPECT_EQ(r.summary.find("likely"), std::string::npos) << r.summary;
    ASSERT_TRUE(r.kill);
    EXPECT_EQ(r.kill->used, 492 * kMiB);
    const nlohmann::json j = r;
    EXPECT_EQ(j["oom_kill"]["limit_bytes"], 512 * kMiB);
    EXPECT_EQ(j["oom_kill"]["after"], 4);
    // The next start reserves what it used, not the configured 100 MiB that the limit killed.
    EXPECT_GE(reservation_now(), 492 * kMiB);
}

TEST_F(KillTest, WithoutALimitTheKernelsOomKillerIsNamed) {
    cgroup = cgroup_v2(std::nullopt, 60 * kMiB, 0);
    start_cpu();
    const auto& r = kill_with(cgroup_v2(std::nullopt, 20 * kMiB, 1));
    EXPECT_EQ(r.kind, engines::ExitKind::out_of_memory);
    EXPECT_NE(r.summary.find("the kernel's OOM killer: the machine ran out of memory (oom_kill 0→1)"),
              std::string::npos)
        << r.summary;
}

TEST_F(KillTest, ASigkillTheCounterDidNotSeeIsNotCalledOutOfMemory) {
    cgroup = cgroup_v2(512 * kMiB, 60 * kMiB, 2);
    start_cpu();
    const auto& r = kill_with(cgroup_v2(512 * kMiB, 20 * kMiB, 2));
    EXPECT_EQ(r.kind, engines::ExitKind::signal);
    EXPECT_NE(r.summary.find("not the OOM killer (the memory cgroup's oom_kill 2→2 did not move)"),
              std::string::npos)
        << r.summary;
    EXPECT_LT(reservation_now(), 200 * kMiB);  // nothing learned from a kill that was not about memory
}

TEST_F(KillTest, OutsideACgroupTheGuessStays) {
    start_cpu();  // no memory cgroup readable
    const auto& r = kill_with(std::nullopt);
    EXPECT_EQ(r.kind, engines::ExitKind::out_of_memory);
    EXPECT_NE(r.summary.find("likely"), std::string::npos) << r.summary;
    EXPECT_FALSE(r.kill);
}

}  // namespace
}  // namespace loch::broker
