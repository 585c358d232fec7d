// The recent events: one per note with its subject and figures merged in, oldest first, only the most
// recent kept.
#include <gtest/gtest.h>

#include "broker/events.hpp"

namespace loch::broker {
namespace {

TEST(RecentEvents, AnEventCarriesItsKindSubjectMessageAndFigures) {
    RecentEvents ev;
    ev.note("evict", {{"model", "chat"}}, "evicted for 'img'", {{"bytes", 42}});
    ev.note("hold", {{"hold", "hold-1"}, {"job", "train"}}, "granted", {}, true);
    const auto r = ev.recent();
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0]["kind"], "evict");
    EXPECT_EQ(r[0]["model"], "chat");
    EXPECT_EQ(r[0]["message"], "evicted for 'img'");
    EXPECT_EQ(r[0]["bytes"], 42);
    EXPECT_TRUE(r[0].contains("at"));
    EXPECT_EQ(r[1]["hold"], "hold-1");
    EXPECT_EQ(r[1]["job"], "train");
}

TEST(RecentEvents, OnlyTheMostRecentAreKept) {
    RecentEvents ev;
    for (int i = 0; i < 250; ++i) ev.note("tick", {{"model", "m"}}, std::to_string(i));
    const auto r = ev.recent();
    ASSERT_EQ(r.size(), RecentEvents::kKept);
    EXPECT_EQ(r.front()["message"], "50");
    EXPECT_EQ(r.back()["message"], "249");
}

}  // namespace
}  // namespace loch::broker
