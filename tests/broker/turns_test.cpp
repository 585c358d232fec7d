// Equal-priority work for different models on a shared GPU's memory is served in bounded time
// (broker/turns.cpp): through the fake launcher, two models that cannot both fit on a 10 GiB GPU.
#include <gtest/gtest.h>

#include "broker_fixture.hpp"

namespace loch::broker {
namespace {

using namespace std::chrono_literals;
using test_fixture::BrokerTest;
using test_fixture::fast;

class TurnsTest : public BrokerTest {
  protected:
    void start_two(std::chrono::milliseconds turn_after) {
        add_model("chat", 6 * kGiB);
        cfg.models.back().concurrency = 2;
        add_model("coder", 6 * kGiB);
        auto o = fast();
        o.memory_turn_after = turn_after;
        start(o);
    }
};

// Before: a steady stream to 'chat' kept its engine busy, so it was never idle, never evicted, and the
// request for 'coder' waited until max_wait. Now, once that request has waited memory_turn_after, 'chat'
// takes no new request; its running ones end, it is evicted like any idle engine, and 'coder' runs.
TEST_F(TurnsTest, ABusyEngineGivesAModelWaitingForItsMemoryItsTurn) {
    start_two(300ms);
    Lease first = running("chat");
    auto coder = acquire("coder");
    run_for(100ms);
    EXPECT_NE(coder.wait_for(0s), std::future_status::ready) << "6 + 6 GiB on 10: it waits for room";
    // Under light contention the busy engine keeps its stream: the waiter has not waited long yet.
    auto second = acquire("chat");
    ASSERT_TRUE(settle(second, 1s));
    Lease also = second.get();
    first.release();
    run_for(400ms);  // now the coder's request has waited longer than memory_turn_after
    auto third = acquire("chat");
    run_for(200ms);
    EXPECT_NE(third.wait_for(0s), std::future_status::ready) << "chat takes no new request: coder's turn";
    also.release();  // chat's last running request ends: it is idle, and evicted for the coder
    ASSERT_TRUE(settle(coder, 5s)) << "the coder runs once chat's running requests end";
    Lease c = coder.get();
    EXPECT_TRUE(c.valid());
    c.release();
    ASSERT_TRUE(settle(third, 5s)) << "and chat's next request after it";
}

}  // namespace
}  // namespace loch::broker
