// The holds' owner: ids handed out in order, a waiting hold found by its queue ids and taken off all of
// them, an ended hold answered from the recent ones (and only the most recent kept), job run times, and
// draining jobs dropped when done.
#include <gtest/gtest.h>

#include "broker/holds_book.hpp"

namespace loch::broker {
namespace {

const Hold::time_point kNow{std::chrono::hours(1)};

TEST(HoldsBook, AHoldIsFoundLiveThenAmongTheEndedOnesOnceRetired) {
    HoldsBook book;
    Hold& a = book.add(book.make(kNow));
    Hold& b = book.add(book.make(kNow));
    EXPECT_EQ(a.id, "hold-1");
    EXPECT_EQ(b.id, "hold-2");
    EXPECT_EQ(a.since, kNow);
    EXPECT_EQ(book.find("hold-1"), &a);
    book.queue(7, a);
    book.queue(9, a);
    book.queue(8, b);
    EXPECT_EQ(book.queued(8), &b);
    EXPECT_EQ(book.dequeue_all(a), (std::vector<std::uint64_t>{7, 9}));
    EXPECT_EQ(book.queued(7), nullptr);
    EXPECT_EQ(book.waiting().size(), 1u);
    book.retire(a);
    EXPECT_EQ(book.find("hold-1"), nullptr);
    ASSERT_NE(book.find_ended("hold-1"), nullptr);
    EXPECT_EQ(book.find_ended("hold-1")->id, "hold-1");
    EXPECT_EQ(book.live().size(), 1u);
    EXPECT_FALSE(book.empty());
}

TEST(HoldsBook, OnlyTheMostRecentEndedHoldsAreKept) {
    HoldsBook book;
    for (int i = 0; i < 100; ++i) book.retire(book.add(book.make(kNow)));
    EXPECT_TRUE(book.empty());
    EXPECT_EQ(book.find_ended("hold-1"), nullptr);
    EXPECT_NE(book.find_ended("hold-100"), nullptr);
    EXPECT_NE(book.find_ended("hold-37"), nullptr);  // the last 64
    EXPECT_EQ(book.find_ended("hold-36"), nullptr);
}

TEST(HoldsBook, JobRunTimesAndDrainingJobs) {
    HoldsBook book;
    EXPECT_FALSE(book.last_run_s("train"));
    book.record_run("train", 42.5);
    EXPECT_EQ(book.last_run_s("train"), 42.5);
    book.drain({"job:train#1", "nvidia:0", {100, 101}, kNow});
    book.drain({"job:caption#2", "nvidia:0", {200}, kNow});
    EXPECT_FALSE(book.drop_drained([](const HoldsBook::Draining&) { return false; }));
    EXPECT_TRUE(book.drop_drained([](const HoldsBook::Draining& d) { return d.holder == "job:train#1"; }));
    std::vector<std::string> left;
    book.drop_drained([&](const HoldsBook::Draining& d) {
        left.push_back(d.holder);
        return false;
    });
    EXPECT_EQ(left, (std::vector<std::string>{"job:caption#2"}));
}

TEST(HoldsBook, ADiscardedHoldIsGoneWithoutAnEnd) {
    HoldsBook book;
    Hold& a = book.add(book.make(kNow));
    book.discard(a.id);
    EXPECT_EQ(book.find("hold-1"), nullptr);
    EXPECT_EQ(book.find_ended("hold-1"), nullptr);
    EXPECT_EQ(book.make(kNow)->id, "hold-2");  // ids are never reused
}

}  // namespace
}  // namespace loch::broker
