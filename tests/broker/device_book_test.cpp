// The broker's book of devices (broker/device_book.hpp): placements as probed, drivers, loads in flight,
// locks.
#include <gtest/gtest.h>

#include "broker/device_book.hpp"

using namespace loch;
using namespace loch::broker;

TEST(DeviceBook, AProbedPlacementWinsOverTheOneTheIdImplies) {
    DeviceBook book;
    EXPECT_EQ(book.placement_of("nvidia:1").backend, "cuda");  // from the id alone
    EXPECT_EQ(book.probed_placement("nvidia:1"), nullptr);
    engines::Placement probed;
    probed.device = "nvidia:1";
    probed.backend = "vulkan";
    probed.ordinal = 0;
    book.observe_placement("nvidia:1", probed);
    EXPECT_EQ(book.placement_of("nvidia:1").backend, "vulkan");
    ASSERT_NE(book.probed_placement("nvidia:1"), nullptr);
    EXPECT_EQ(book.probed_placement("nvidia:1")->ordinal, 0);
}

TEST(DeviceBook, ADriverIsKnownOnceProbed) {
    DeviceBook book;
    EXPECT_EQ(book.driver_of("nvidia:0"), "");
    book.observe_driver("nvidia:0", "580.95.05");
    EXPECT_EQ(book.driver_of("nvidia:0"), "580.95.05");
}

TEST(DeviceBook, LoadsInFlightAreCountedPerDevice) {
    DeviceBook book;
    EXPECT_FALSE(book.any_loading());
    book.begin_loading("cpu");
    book.begin_loading("nvidia:0");
    EXPECT_TRUE(book.loading("cpu"));
    EXPECT_EQ(book.loading(), (std::vector<std::string>{"cpu", "nvidia:0"}));
    book.end_loading("cpu");
    EXPECT_FALSE(book.loading("cpu"));
    EXPECT_TRUE(book.any_loading());
}

TEST(DeviceBook, OnlyTheHolderLetsGoOfAnExclusiveLock) {
    DeviceBook book;
    book.lock("nvidia:0", "flux");
    EXPECT_EQ(book.holder("nvidia:0"), "flux");
    book.unlock("nvidia:0", "chat");  // not its lock
    EXPECT_EQ(book.holder("nvidia:0"), "flux");
    book.unlock("nvidia:0", "flux");
    EXPECT_FALSE(book.holder("nvidia:0").has_value());
    EXPECT_TRUE(book.locks().empty());
}
