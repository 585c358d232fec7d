// On the machine the tests run on: the CPU device's MemAvailable agrees with /proc/meminfo (within 1%:
// the two reads happen at slightly different times), both through the library and through `loch devices`.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "devices/probe.hpp"
#include "devices/run_loch.hpp"

namespace loch::devices {
namespace {

std::uint64_t meminfo_available_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    std::uint64_t kb = 0;
    while (in >> key >> kb >> unit)
        if (key == "MemAvailable:") return kb * 1024;
    ADD_FAILURE() << "no MemAvailable in /proc/meminfo";
    return 0;
}

void expect_within_one_percent(std::uint64_t got, std::uint64_t want) {
    const double diff = std::abs(static_cast<double>(got) - static_cast<double>(want));
    EXPECT_LE(diff, 0.01 * static_cast<double>(want))
        << "loch " << got << " B vs /proc/meminfo " << want << " B";
}

TEST(ThisMachine, ProbeReadsMemAvailable) {
    const auto r = probe(default_probe_options("/", process_environment()));
    const auto* cpu = r.find("cpu");
    ASSERT_NE(cpu, nullptr);
    const auto* ram = cpu->pool(PoolKind::host_ram);
    ASSERT_TRUE(ram->free.ok()) << ram->free.detail;
    expect_within_one_percent(ram->free->bytes, meminfo_available_bytes());
    EXPECT_EQ(ram->free->detail, "/proc/meminfo MemAvailable");
}

TEST(ThisMachine, LochDevicesJsonReportsMemAvailable) {
    const std::string loch = std::string(LOCH_BIN_DIR) + "/loch";
    ASSERT_TRUE(std::filesystem::exists(loch)) << loch << " is not built";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(("'" + loch + "' devices --json").c_str(), "r"),
                                               ::pclose);
    ASSERT_TRUE(pipe);
    std::string out;
    char buf[4096];
    while (auto n = std::fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
    const auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    const nlohmann::json* cpu = nullptr;
    for (const auto& d : j.at("devices"))
        if (d.at("id") == "cpu") cpu = &d;
    ASSERT_NE(cpu, nullptr) << out;
    const auto& free = cpu->at("pools").at(0).at("free");
    EXPECT_EQ(free.at("source"), "measured");
    EXPECT_EQ(free.at("detail"), "/proc/meminfo MemAvailable");
    expect_within_one_percent(free.at("bytes").get<std::uint64_t>(), meminfo_available_bytes());
}

}  // namespace
}  // namespace loch::devices
