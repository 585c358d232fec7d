// The wait queue: interactive first, batch aging, bounds per class.
#include <gtest/gtest.h>

#include "broker/wait_queue.hpp"

using namespace loch::broker;
using namespace std::chrono_literals;

TEST(WaitQueue, InteractiveBeforeBatchThenArrival) {
    WaitQueue q(10, 10, 30s);
    const auto t0 = WaitQueue::Clock::time_point{} + 1000s;
    q.push(1, Priority::batch, t0);
    q.push(2, Priority::interactive, t0 + 1s);
    q.push(3, Priority::interactive, t0 + 2s);
    q.push(4, Priority::batch, t0 + 3s);
    EXPECT_EQ(q.order(t0 + 5s), (std::vector<std::uint64_t>{2, 3, 1, 4}));
}

TEST(WaitQueue, AgedBatchCompetesAsInteractiveSoItNeverStarves) {
    WaitQueue q(10, 10, 30s);
    const auto t0 = WaitQueue::Clock::time_point{} + 1000s;
    q.push(1, Priority::batch, t0);
    q.push(2, Priority::interactive, t0 + 20s);
    q.push(3, Priority::interactive, t0 + 40s);
    // At t0+31 s the batch request is older than `aging`: it goes before interactive requests that came
    // later.
    EXPECT_EQ(q.order(t0 + 41s), (std::vector<std::uint64_t>{1, 2, 3}));
    EXPECT_EQ(q.order(t0 + 25s).front(), 2u);
}

TEST(WaitQueue, BoundedPerClass) {
    WaitQueue q(2, 2, 30s);
    const auto t = WaitQueue::Clock::now();
    EXPECT_TRUE(q.push(1, Priority::interactive, t));
    EXPECT_TRUE(q.push(2, Priority::interactive, t));
    EXPECT_FALSE(q.push(3, Priority::interactive, t));
    EXPECT_TRUE(q.push(4, Priority::batch, t));  // the other class has its own room
    EXPECT_EQ(q.size(Priority::interactive), 2u);
    EXPECT_TRUE(q.remove(1));
    EXPECT_FALSE(q.remove(1));
    EXPECT_TRUE(q.push(5, Priority::interactive, t));
    EXPECT_EQ(q.size(), 3u);
}
