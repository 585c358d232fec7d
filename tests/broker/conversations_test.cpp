// The owner of conversations that survive an eviction (broker/conversations): a run saves slots only once its
// launch's folder is ready and only until the next run of its model begins; a restore counts as restored only
// when the first answer reused what was restored, and says so in the events with the figures.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "broker/conversations.hpp"
#include "support/run_to_end.hpp"
#include "support/temp_dir.hpp"

namespace loch::broker {
namespace {

using test::run_to_end;

struct ConversationsTest : ::testing::Test {
    test::TempDir dir{"loch-conversations"};
    boost::asio::io_context io;
    core::ManualClock clock;
    RecentEvents events;
    Conversations conversations{io.get_executor(), dir.path() / "slots", config::SlotSaveConfig{}, clock,
                                events};

    nlohmann::json last_event() const {
        const auto all = events.recent();
        return all.empty() ? nlohmann::json() : all.back();
    }
};

TEST_F(ConversationsTest, ARunSavesOnlyOnceItsFolderIsReady) {
    EXPECT_FALSE(conversations.saves("chat"));
    run_to_end(io, conversations.prepare("chat", nullptr, {"/bin/true", "-c", "4096"}));
    EXPECT_TRUE(conversations.saves("chat"));
    EXPECT_FALSE(conversations.saves("other"));
}

TEST_F(ConversationsTest, WithSavingOffNoRunSaves) {
    config::SlotSaveConfig off;
    off.enabled = false;
    conversations.configure(off);
    run_to_end(io, conversations.prepare("chat", nullptr, {"/bin/true"}));
    EXPECT_FALSE(conversations.saves("chat"));
}

TEST_F(ConversationsTest, ARestoreWhoseAnswerReusedItCountsAsRestored) {
    const nlohmann::json restored = {{"file", "1-0.bin"}, {"slot", 0}, {"tokens", 1000}, {"ms", 12.0}};
    EXPECT_EQ(conversations.confirm("chat", restored, 990, 1010), std::optional(true));
    EXPECT_EQ(conversations.restores("chat").ok, 1u);
    EXPECT_EQ(conversations.restores("chat").failed, 0u);
    const auto e = last_event();
    EXPECT_EQ(e["kind"], "slot_restored");
    EXPECT_EQ(e["model"], "chat");
    EXPECT_EQ(e["cached_tokens"], 990);
}

TEST_F(ConversationsTest, ARestoreWhoseAnswerReadThePromptAgainIsAFailureWithTheFigures) {
    const nlohmann::json restored = {{"file", "1-0.bin"}, {"slot", 1}, {"tokens", 1000}, {"ms", 12.0}};
    EXPECT_EQ(conversations.confirm("chat", restored, 0, 1010), std::optional(false));
    EXPECT_EQ(conversations.restores("chat").ok, 0u);
    EXPECT_EQ(conversations.restores("chat").failed, 1u);
    const auto e = last_event();
    EXPECT_EQ(e["kind"], "slot_restore_failed");
    EXPECT_EQ(e["tokens"], 1000);
    EXPECT_EQ(e["cached_tokens"], 0);
    EXPECT_EQ(e["prompt_tokens"], 1010);
}

TEST_F(ConversationsTest, AnAnswerThatDoesNotSayIsNotedAsRestoredUnverified) {
    const nlohmann::json restored = {{"file", "1-0.bin"}, {"slot", 0}, {"tokens", 1000}, {"ms", 12.0}};
    EXPECT_EQ(conversations.confirm("chat", restored, std::nullopt, std::nullopt), std::nullopt);
    EXPECT_EQ(conversations.restores("chat").ok, 1u);
    EXPECT_EQ(last_event()["kind"], "slot_restored");
}

}  // namespace
}  // namespace loch::broker
