// broker::cap_to_cgroup — inside a memory cgroup whose limit is below the RAM, the CPU's capacity is the
// limit and its free memory the lesser of what the limit leaves (over the working set, not the page cache)
// and the machine's MemAvailable; a limit above the RAM, or none, changes nothing.
#include <gtest/gtest.h>

#include "broker/device_source.hpp"
#include "core/memory.hpp"

namespace loch::broker {
namespace {

DeviceSnapshot host_cpu(std::uint64_t total, std::uint64_t used) {
    DeviceSnapshot s;
    s.id = "cpu";
    s.total = {total, Source::measured, "/proc/meminfo MemTotal"};
    s.used = MemoryFigure{used, Source::measured, "MemTotal - MemAvailable"};
    return s;
}

devices::MemoryCgroup cgroup(std::optional<std::uint64_t> limit, std::uint64_t current,
                             std::uint64_t inactive) {
    devices::MemoryCgroup c;
    c.limit = limit;
    c.limit_file = "/sys/fs/cgroup/memory.max";
    c.current = current;
    c.inactive_file = inactive;
    return c;
}

TEST(CgroupCapacity, TheLimitIsTheCapacityAndItsWorkingSetTheUse) {
    auto cpu = host_cpu(24 * kGiB, 4 * kGiB);
    cap_to_cgroup(cpu, cgroup(512 * kMiB, 200 * kMiB, 150 * kMiB));
    EXPECT_EQ(cpu.total.bytes, 512 * kMiB);
    EXPECT_NE(cpu.total.detail.find("/sys/fs/cgroup/memory.max"), std::string::npos);
    ASSERT_TRUE(cpu.used);
    EXPECT_EQ(cpu.used->bytes, 50 * kMiB);  // 200 MiB charged, 150 MiB of it droppable page cache
}

TEST(CgroupCapacity, AFullMachineLeavesLessThanTheLimitDoes) {
    auto cpu = host_cpu(24 * kGiB, 24 * kGiB - 100 * kMiB);  // 100 MiB available on the machine
    cap_to_cgroup(cpu, cgroup(8 * kGiB, kGiB, 0));
    EXPECT_EQ(cpu.total.bytes, 8 * kGiB);
    EXPECT_EQ(cpu.used->bytes, 8 * kGiB - 100 * kMiB);
}

TEST(CgroupCapacity, NoLimitOrOneAboveTheRamChangesNothing) {
    auto cpu = host_cpu(24 * kGiB, 4 * kGiB);
    cap_to_cgroup(cpu, cgroup(std::nullopt, kGiB, 0));
    EXPECT_EQ(cpu.total.bytes, 24 * kGiB);
    cap_to_cgroup(cpu, cgroup(64 * kGiB, kGiB, 0));
    EXPECT_EQ(cpu.total.bytes, 24 * kGiB);
    EXPECT_EQ(cpu.used->bytes, 4 * kGiB);
}

TEST(CgroupCapacity, AUseAboveTheLimitLeavesNothingFree) {
    auto cpu = host_cpu(24 * kGiB, 4 * kGiB);
    cap_to_cgroup(cpu, cgroup(512 * kMiB, 600 * kMiB, 0));
    EXPECT_EQ(cpu.used->bytes, 512 * kMiB);
}

}  // namespace
}  // namespace loch::broker
