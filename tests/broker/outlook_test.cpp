// Broker::outlook — how a model stands on this box for a load balancer (HAProxy's agent), on the fake 10 GiB
// GPU: unknown, never fits, fits now (with the memory left after it), fits only after evicting an idle
// model, and resident once it runs; the queue figures come along.
#include <gtest/gtest.h>

#include "broker/broker.hpp"
#include "broker_fixture.hpp"

namespace loch::broker {
namespace {

using namespace std::chrono_literals;
using test_fixture::BrokerTest;
using test_fixture::fast;
using Fit = Outlook::Fit;

TEST_F(BrokerTest, TheOutlookOfEachModelIsWhatAdmissionWouldDecideNow) {
    add_model("small", 4 * kGiB);
    add_model("big", 7 * kGiB);
    add_model("huge", 20 * kGiB);
    start(fast());
    EXPECT_EQ(broker->view().outlook("nobody").fit, Fit::unknown_model);
    // The first question starts the estimate (configured sizes here: at once).
    for (const char* m : {"small", "big", "huge"}) broker->view().outlook(m);
    run_for(50ms);
    EXPECT_EQ(broker->view().outlook("huge").fit, Fit::never);
    EXPECT_FALSE(broker->view().outlook("huge").why.empty());
    const auto small = broker->view().outlook("small");
    EXPECT_EQ(small.fit, Fit::fits_now);
    EXPECT_NEAR(small.free_share_after, 0.6, 0.05);  // 6 of 10 GiB left
    EXPECT_GT(small.queue_limit, 0u);

    {
        auto s = acquire("small");
        ASSERT_TRUE(settle(s));
        const auto resident = broker->view().outlook("small");
        EXPECT_EQ(resident.fit, Fit::resident);
        EXPECT_EQ(resident.active, 1u);
        EXPECT_EQ(resident.slots, 1u);
        // 7 GiB does not fit beside a busy 4 GiB: only later.
        EXPECT_EQ(broker->view().outlook("big").fit, Fit::fits_later);
        s.get().release();
    }
    run_for(20ms);
    // Idle now: big fits after evicting it.
    EXPECT_EQ(broker->view().outlook("big").fit, Fit::fits_evicting);
}

}  // namespace
}  // namespace loch::broker
