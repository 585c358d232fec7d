// Admission of a need with a host part (Need::host_bytes): what a GPU engine also keeps in the host's RAM
// is admitted with it — it fits only when both fit, evicts CPU engines for its RAM, refuses when the RAM
// can never hold it.
#include <gtest/gtest.h>

#include "broker/admission.hpp"

using namespace loch;
using namespace loch::broker;

namespace {

Ledger gpu_and_host(std::uint64_t gpu, std::uint64_t host) {
    Ledger l;
    DeviceLimits g;
    g.id = "gpu0";
    g.total = {gpu, Source::measured, ""};
    l.set_device(g);
    DeviceLimits c;
    c.id = "cpu";
    c.total = {host, Source::measured, ""};
    l.set_device(c);
    return l;
}

Need on_gpu(std::uint64_t bytes, std::uint64_t host) {
    Need n;
    n.device = "gpu0";
    n.bytes = bytes;
    n.host_bytes = host;
    n.host_why = "components kept in RAM by the sd flags";
    return n;
}

EngineView on_cpu(std::string name, std::uint64_t bytes, bool evictable) {
    EngineView e;
    e.name = std::move(name);
    e.device = "cpu";
    e.bytes = bytes;
    e.evictable = evictable;
    e.idle_s = 100;
    e.held_as = evictable ? "idle" : "busy";
    return e;
}

}  // namespace

TEST(AdmissionHostPart, StartsOnlyWhenTheHostRamFitsToo) {
    Ledger l = gpu_and_host(80 * kGiB, 32 * kGiB);
    AdmissionInput in{{on_gpu(10 * kGiB, 24 * kGiB)}, 1, {}, {}};
    auto d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::start);
    EXPECT_NE(d.reason.find("host RAM"), std::string::npos) << d.reason;

    l.reserve("cpu", "chat", {16 * kGiB, Source::measured, ""});  // a busy CPU model holds half the RAM
    in.engines = {on_cpu("chat", 16 * kGiB, false)};
    d = decide(in, l);
    EXPECT_EQ(d.kind, Decision::Kind::wait) << d.reason;
    EXPECT_NE(d.reason.find("cpu"), std::string::npos) << d.reason;  // names the short device, not the GPU
    EXPECT_NE(d.reason.find("chat"), std::string::npos) << d.reason;
}

TEST(AdmissionHostPart, EvictsAnIdleCpuEngineForItsRam) {
    Ledger l = gpu_and_host(80 * kGiB, 32 * kGiB);
    l.reserve("cpu", "chat", {16 * kGiB, Source::measured, ""});
    AdmissionInput in{{on_gpu(10 * kGiB, 24 * kGiB)}, 1, {on_cpu("chat", 16 * kGiB, true)}, {}};
    const auto d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start) << d.reason;
    EXPECT_EQ(d.device, "gpu0");
    EXPECT_EQ(d.victims, std::vector<std::string>{"chat"});
}

TEST(AdmissionHostPart, AGpuVictimFreesItsHostPartToo) {
    // Another image engine holds the GPU and 20 GiB of RAM: stopping it frees both.
    Ledger l = gpu_and_host(40 * kGiB, 32 * kGiB);
    l.reserve("gpu0", "flux", {30 * kGiB, Source::measured, ""});
    l.reserve("cpu", "flux", {20 * kGiB, Source::formula, ""});
    EngineView flux;
    flux.name = "flux";
    flux.device = "gpu0";
    flux.bytes = 30 * kGiB;
    flux.also_on = {{"cpu", 20 * kGiB}};
    flux.evictable = true;
    flux.idle_s = 50;
    AdmissionInput in{{on_gpu(20 * kGiB, 24 * kGiB)}, 1, {flux}, {}};
    const auto d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start) << d.reason;
    EXPECT_EQ(d.victims, std::vector<std::string>{"flux"});
    EXPECT_EQ(d.freed_bytes, 50 * kGiB);
}

TEST(AdmissionHostPart, RefusesWhenTheHostRamCanNeverHoldItWithTheNumbers) {
    Ledger l = gpu_and_host(80 * kGiB, 16 * kGiB);
    AdmissionInput in{{on_gpu(10 * kGiB, 24 * kGiB)}, 1, {}, {}};
    const auto d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::refuse) << d.reason;
    EXPECT_EQ(d.refusal.device, "cpu");
    EXPECT_EQ(d.refusal.need, 24 * kGiB);
    EXPECT_EQ(d.refusal.capacity, 16 * kGiB);
    ASSERT_FALSE(d.refusal.would_help.empty());
    EXPECT_NE(d.refusal.would_help.back().find("host RAM"), std::string::npos);
}

TEST(AdmissionHostPart, IsIgnoredWithoutAHostDeviceInTheLedger) {
    Ledger l;
    DeviceLimits g;
    g.id = "gpu0";
    g.total = {80 * kGiB, Source::measured, ""};
    l.set_device(g);
    AdmissionInput in{{on_gpu(10 * kGiB, 24 * kGiB)}, 1, {}, {}};
    EXPECT_EQ(decide(in, l).kind, Decision::Kind::start);
}
