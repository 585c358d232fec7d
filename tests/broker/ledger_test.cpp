// The ledger: capacity, outside use, reservations replaced by measured figures.
#include <gtest/gtest.h>

#include "broker/ledger.hpp"

using namespace loch;
using namespace loch::broker;

namespace {
DeviceLimits dev(std::string id, std::uint64_t total, std::uint64_t reserve = 0,
                 std::optional<std::uint64_t> cap = std::nullopt) {
    DeviceLimits l;
    l.id = std::move(id);
    l.total = {total, Source::measured, "probe"};
    l.reserve = {reserve, Source::configured, "reserve"};
    if (cap) l.cap = MemoryFigure{*cap, Source::configured, "budget"};
    return l;
}
}  // namespace

TEST(Ledger, FreeIsCapacityMinusReservationsAndOutsideUse) {
    Ledger l;
    l.set_device(dev("gpu0", 24 * kGiB, 1 * kGiB));
    EXPECT_EQ(l.capacity("gpu0"), 23 * kGiB);
    EXPECT_EQ(l.free("gpu0"), 23 * kGiB);
    l.reserve("gpu0", "a", {5 * kGiB, Source::engine_dry_run, ""});
    EXPECT_EQ(l.own("gpu0"), 5 * kGiB);
    EXPECT_EQ(l.free("gpu0"), 18 * kGiB);
    // The engine is loaded and the probe sees it plus 2 GiB of someone else's.
    l.mark_loaded("gpu0", "a");
    l.observe_used("gpu0", 7 * kGiB);
    EXPECT_EQ(l.outside("gpu0"), 2 * kGiB);
    EXPECT_EQ(l.free("gpu0"), 16 * kGiB);
}

TEST(Ledger, LoadingReservationDoesNotHideOutsideUse) {
    Ledger l;
    l.set_device(dev("gpu0", 10 * kGiB));
    l.reserve("gpu0", "a", {4 * kGiB, Source::formula, ""});
    // Mid-load the probe sees 1 GiB of it: counted as outside until loaded, so free errs low, never high.
    l.observe_used("gpu0", 1 * kGiB);
    EXPECT_EQ(l.outside("gpu0"), 1 * kGiB);
    EXPECT_EQ(l.free("gpu0"), 5 * kGiB);
}

// A measured figure below the reservation does not lower it (free must not go up before the probe shows
// the memory free); a larger one (a per-process peak) raises it.
TEST(Ledger, MeasuredOnlyRaisesTheReservation) {
    Ledger l;
    l.set_device(dev("cpu", 64 * kGiB, 0, 2 * kGiB));
    l.reserve("cpu", "a", {1 * kGiB, Source::engine_dry_run, "dry run"});
    EXPECT_FALSE(l.raise_to_measured("cpu", "a", {600 * kMiB, Source::measured, "log"}));
    auto r = l.reservation("cpu", "a");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->bytes, 1 * kGiB);
    EXPECT_EQ(r->source, Source::engine_dry_run);
    EXPECT_TRUE(l.raise_to_measured("cpu", "a", {1280 * kMiB, Source::measured, "peak RSS"}));
    EXPECT_EQ(l.reservation("cpu", "a")->bytes, 1280 * kMiB);
    EXPECT_EQ(l.reservation("cpu", "a")->source, Source::measured);
    EXPECT_EQ(l.free("cpu"), 2 * kGiB - 1280 * kMiB);
    l.release("a");
    EXPECT_EQ(l.free("cpu"), 2 * kGiB);
}

// What can ever be free leaves out the driver's reservation and what other programs hold now.
TEST(Ledger, CapacityIsWhatCanEverBeFree) {
    Ledger l;
    auto d = dev("nvidia:0", 140 * kGiB, 1 * kGiB);
    d.driver_reserved = {615 * kMiB, Source::measured, "NVML v2 reserved"};
    l.set_device(d);
    EXPECT_EQ(l.empty_capacity("nvidia:0"), 139 * kGiB - 615 * kMiB);
    l.observe_used("nvidia:0", 3 * kGiB);  // another program
    EXPECT_EQ(l.outside("nvidia:0"), 3 * kGiB);
    EXPECT_EQ(l.capacity("nvidia:0"), 136 * kGiB - 615 * kMiB);
    EXPECT_EQ(l.free("nvidia:0"), l.capacity("nvidia:0"));
}

TEST(Ledger, BudgetCapAndPhysicalLimitBothBind) {
    Ledger l;
    l.set_device(dev("cpu", 24 * kGiB, 0, 1 * kGiB));
    // Others use 10 GiB of 24: the 1 GiB cap binds, not the rest of the machine.
    l.observe_used("cpu", 10 * kGiB);
    EXPECT_EQ(l.free("cpu"), 1 * kGiB);
    // Others use 23.5 GiB: the physical limit binds.
    l.observe_used("cpu", 23 * kGiB + 512 * kMiB);
    EXPECT_EQ(l.free("cpu"), 512 * kMiB);
    EXPECT_EQ(l.capacity("cpu"), 512 * kMiB);
    EXPECT_EQ(l.empty_capacity("cpu"), 1 * kGiB);
}

TEST(Ledger, UnknownDeviceIsRejectedForReservations) {
    Ledger l;
    EXPECT_THROW(l.reserve("nope", "a", {}), std::invalid_argument);
    EXPECT_EQ(l.free("nope"), 0u);
}
