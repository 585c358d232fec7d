// Engines on the CPU compute side by side only while their threads fit in its cores (broker/cpu_threads):
// through the fake launcher, with llama-server models (the kind that knows its threads) on a 2-core CPU.
#include <gtest/gtest.h>

#include "broker_fixture.hpp"
#include "devices/sysroot_fixture.hpp"
#include "engines/kinds/llama_server.hpp"

namespace loch::broker {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test_fixture::BrokerTest;
using test_fixture::fake_cpu;
using test_fixture::fake_gpu;
using test_fixture::fast;
using test_fixture::kGpu;

// 1 GiB on whatever device it is asked for: the test is about threads, not memory.
struct OneGiB : FootprintSource {
    asio::awaitable<Footprint> estimate(const config::Config&, const config::ModelConfig&,
                                        const std::vector<engines::Placement>& devices) override {
        Footprint f;
        f.source = Source::configured;
        for (const auto& d : devices) {
            Need n;
            n.device = d.device;
            n.bytes = kGiB;
            n.source = Source::configured;
            f.needs.push_back(n);
        }
        co_return f;
    }
};

class CpuThreadsTest : public BrokerTest {
  protected:
    void add_cpu_model(const std::string& name, std::optional<std::uint32_t> threads,
                       config::Priority prio = config::Priority::interactive) {
        config::ModelConfig m;
        m.name = name;
        m.engine = "llama-server";
        m.path = "/models/" + name + ".gguf";
        auto a = std::make_shared<engines::LlamaArgs>();
        a->ctx = 2048;
        a->parallel = 2;
        a->threads = threads;
        m.settings = a;
        m.devices = {"cpu"};
        m.priority = prio;
        m.keep_alive.reset();
        cfg.models.push_back(m);
    }
    // A llama-server model on the GPU; `ngl`: its -ngl (unset: every layer on the GPU).
    void add_gpu_model(const std::string& name, std::optional<int> ngl) {
        add_cpu_model(name, 2);
        auto a = std::make_shared<engines::LlamaArgs>(engines::llama_args(cfg.models.back()));
        a->n_gpu_layers = ngl;
        cfg.models.back().settings = a;
        cfg.models.back().devices = {kGpu};
    }
    void start_gpu_and_cpu() {
        footprints = std::make_unique<OneGiB>();
        cfg.programs["llama-server"] = "/bin/true";
        auto o = fast();
        o.cpu_cores = 2;
        start_on({fake_gpu(80 * kGiB), fake_cpu(64 * kGiB)}, o);
    }
    void start_cpu(std::string_view policy = "loch") {
        footprints = std::make_unique<OneGiB>();
        cfg.programs["llama-server"] = "/bin/true";  // never run: the fake launcher starts nothing
        DeviceSnapshot cpu;
        cpu.id = "cpu";
        cpu.total = {64 * kGiB, Source::measured, "fake"};
        cpu.used = MemoryFigure{0, Source::measured, "fake"};
        auto o = fast();
        o.cpu_cores = 2;
        o.policy = policy_named(policy);
        start_on({cpu}, o);
    }
    // While `busy` computes, a request for `waiting` waits, its reason naming `reason`; it goes once `busy`
    // ends.
    void waits_while_computing(const std::string& busy, const std::string& waiting,
                               const std::string& reason) {
        Lease computing = running(busy);
        auto w = acquire(waiting);
        run_for(300ms);
        EXPECT_NE(w.wait_for(0s), std::future_status::ready) << "2 + 2 threads on 2 cores: it must wait";
        EXPECT_NE(waiting_reason().find(reason), std::string::npos) << waiting_reason();
        computing.release();
        ASSERT_TRUE(settle(w));
        w.get().release();
    }
    std::string waiting_reason() {
        auto st = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
        settle(st);
        const auto j = st.get();
        const auto& w = j["queue"]["waiting"];
        return w.empty() ? std::string() : w[0]["reason"].get<std::string>();
    }
};

TEST(CpuCores, ACgroupCpuQuotaBoundsTheCoresLochCountsAndNoQuotaLeavesTheAffinityMask) {
    loch::testing::ScratchSysroot tree("cgroup-v2-service-slice");
    const auto unbounded = cpus_loch_may_use(devices::Sysroot(tree.path()));
    EXPECT_GE(unbounded, 1u);
    tree.write("/sys/fs/cgroup/loch.slice/cpu.max", "150000 100000\n");  // a pod limited to 1.5 CPUs
    EXPECT_EQ(cpus_loch_may_use(devices::Sysroot(tree.path())), 1u);
}

TEST_F(CpuThreadsTest, AnIdleEngineWaitsWhileAnotherComputesWithTheCoresAndGoesTheMomentItEnds) {
    add_cpu_model("chat", 2);
    add_cpu_model("captioner", 2);
    start_cpu();
    Lease computing = running("captioner");
    auto chat = acquire("chat");
    run_for(300ms);
    EXPECT_NE(chat.wait_for(0s), std::future_status::ready) << "2 + 2 threads on 2 cores: it must wait";
    EXPECT_NE(waiting_reason().find("core"), std::string::npos) << waiting_reason();
    computing.release();
    ASSERT_TRUE(settle(chat));
    EXPECT_TRUE(chat.get().valid());
}

// Issue 51: on the 2-core box one model's steady load kept its engine computing — each new request went into
// a free slot — and every request of the other model timed out after max_wait. Now an engine takes no new
// request while another model's request of equal priority waits for the cores: it drains, the other goes,
// and the same rule then holds the other to it.
TEST_F(CpuThreadsTest, ASteadyStreamToOneModelLetsTheOtherHaveItsTurn) {
    add_cpu_model("chat", 2);
    add_cpu_model("captioner", 2);
    start_cpu();
    Lease first = running("captioner");
    auto chat = acquire("chat");
    run_for(100ms);
    auto second = acquire("captioner");  // a free slot, but chat waits for the cores
    run_for(300ms);
    EXPECT_NE(second.wait_for(0s), std::future_status::ready)
        << "the captioner takes no new request while chat waits for its turn";
    EXPECT_NE(chat.wait_for(0s), std::future_status::ready) << "the captioner still computes";
    first.release();
    ASSERT_TRUE(settle(chat)) << "chat goes once the captioner's running request ends";
    Lease person = chat.get();
    run_for(100ms);
    EXPECT_NE(second.wait_for(0s), std::future_status::ready) << "now the captioner waits for chat's cores";
    // Chat's own next request waits for the captioner's turn in the same way.
    auto again = acquire("chat");
    run_for(200ms);
    EXPECT_NE(again.wait_for(0s), std::future_status::ready)
        << "chat takes no new request while the captioner waits";
    person.release();
    ASSERT_TRUE(settle(second));
    Lease item = second.get();
    item.release();
    ASSERT_TRUE(settle(again));
}

// A steady stream: the captioner always has a request running and the next already waiting; each chat
// request is served after at most the captioner's requests that run when it arrives.
TEST_F(CpuThreadsTest, UnderASteadyStreamEachOtherRequestWaitsOnlyForTheRunningOnes) {
    add_cpu_model("chat", 2);
    add_cpu_model("captioner", 2);
    start_cpu();
    std::vector<Lease> running_items;
    running_items.push_back(running("captioner"));
    running_items.push_back(running("captioner"));
    for (int round = 0; round < 3; ++round) {
        auto chat = acquire("chat");
        auto next = acquire("captioner");
        run_for(50ms);
        EXPECT_NE(chat.wait_for(0s), std::future_status::ready);
        running_items.clear();  // the running items end (two of the captioner's request times)
        ASSERT_TRUE(settle(chat)) << "round " << round;
        chat.get().release();
        ASSERT_TRUE(settle(next)) << "round " << round;
        running_items.push_back(next.get());
        running_items.push_back(running("captioner"));
    }
}

TEST_F(CpuThreadsTest, APersonsRequestDoesNotWaitForBatchWorkButTheBatchsNextItemWaitsForThePerson) {
    add_cpu_model("chat", 2);
    add_cpu_model("captioner", 2, config::Priority::batch);
    start_cpu();
    Lease item = running("captioner");
    auto chat = acquire("chat");
    ASSERT_TRUE(settle(chat)) << "batch work yields to people: the person does not wait for its threads";
    Lease person = chat.get();
    item.release();
    auto next = acquire("captioner");
    run_for(300ms);
    EXPECT_NE(next.wait_for(0s), std::future_status::ready) << "the next batch item waits for the person";
    person.release();
    ASSERT_TRUE(settle(next));
}

// A GPU engine with layers left on the CPU (-ngl below all of them) computes them with its threads: a CPU
// engine waits for it as for another CPU engine. Fully offloaded, it leaves the cores alone.
TEST_F(CpuThreadsTest, AGpuEngineWithLayersOnTheCpuCountsAndAFullyOffloadedOneDoesNot) {
    add_gpu_model("partial", 10);
    add_gpu_model("offloaded", std::nullopt);
    add_cpu_model("chat", 2);
    start_gpu_and_cpu();
    waits_while_computing("partial", "chat", "'partial'");
    Lease computing = running("offloaded");
    auto chat = acquire("chat");
    ASSERT_TRUE(settle(chat)) << "every layer on the GPU: the CPU is free";
}

TEST_F(CpuThreadsTest, EnginesWhoseThreadsAddUpToTheCoresComputeSideBySide) {
    add_cpu_model("chat", 1);
    add_cpu_model("captioner", 1);
    start_cpu();
    Lease computing = running("captioner");
    auto chat = acquire("chat");
    ASSERT_TRUE(settle(chat));
    EXPECT_TRUE(chat.get().valid());
}

TEST_F(CpuThreadsTest, TheEnginesDefaultThreadsCountAsEveryCoreAndTheAnchorsPoliciesDoNotCount) {
    add_cpu_model("chat", std::nullopt);  // llama.cpp's default: its physical cores
    add_cpu_model("captioner", 1);
    start_cpu("keepalive-lru");
    Lease computing = running("captioner");
    auto chat = acquire("chat");
    ASSERT_TRUE(settle(chat)) << "Ollama's policy runs them side by side";
    chat.get().release();
    computing.release();
}

TEST_F(CpuThreadsTest, AnEngineWithItsDefaultThreadsWaitsForAnotherComputing) {
    add_cpu_model("chat", std::nullopt);
    add_cpu_model("captioner", 1);
    start_cpu();
    Lease computing = running("captioner");
    auto chat = acquire("chat");
    run_for(300ms);
    EXPECT_NE(chat.wait_for(0s), std::future_status::ready) << "1 + 2 (its default) threads on 2 cores";
    computing.release();
    ASSERT_TRUE(settle(chat));
}

}  // namespace
}  // namespace loch::broker

namespace loch::broker {
namespace {

// A command engine (a Python server, a script) counts with `command.threads`; without it, it is not
// counted (loch cannot know its threads).
TEST_F(CpuThreadsTest, ACommandEngineCountsWithItsThreadsSettingAndNotWithout) {
    add_cpu_model("chat", 2);
    add_model("script", kGiB);
    cfg.models.back().devices = {"cpu"};
    auto counted = std::make_shared<engines::CommandSettings>(engines::command_settings(cfg.models.back()));
    counted->threads = 2;
    cfg.models.back().settings = counted;
    add_model("uncounted", kGiB);
    cfg.models.back().devices = {"cpu"};
    start_cpu();
    waits_while_computing("script", "chat", "'script' (2 thread(s))");
    Lease other = running("uncounted");
    auto chat = acquire("chat");
    EXPECT_TRUE(settle(chat, 1s)) << "a command engine without threads is not counted";
}

}  // namespace
}  // namespace loch::broker
