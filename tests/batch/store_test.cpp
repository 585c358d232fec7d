// The batch store on a real SQLite file: records survive reopening (a restart), an item is finished with its
// result in one step, a crash's running items are re-run once and never a third time, finished items never
// again, custom_ids are unique per batch, pagination is newest first, the owner's commits never checkpoint.
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include "batch/store.hpp"
#include "support/temp_dir.hpp"

namespace loch::batch {
namespace {

std::vector<ItemRecord> items(int n) {
    std::vector<ItemRecord> out;
    for (int i = 1; i <= n; ++i) {
        ItemRecord r;
        r.line = i;
        r.custom_id = "req-" + std::to_string(i);
        r.url = "/v1/chat/completions";
        r.model = "demo";
        r.line_offset = static_cast<std::uint64_t>(i) * 100;
        r.line_bytes = 90;
        out.push_back(r);
    }
    return out;
}

BatchRecord batch(const std::string& id, std::int64_t at = 1000) {
    BatchRecord b;
    b.id = id;
    b.input_file_id = "file-1";
    b.endpoint = "/v1/chat/completions";
    b.created_at = at;
    return b;
}

struct StoreTest : ::testing::Test {
    test::TempDir dir{"loch-store"};
    std::filesystem::path db() const { return dir.path() / "batches.sqlite3"; }
};

TEST_F(StoreTest, FilesAndBatchesSurviveReopeningTheDatabase) {
    {
        Store s(db());
        FileRecord f{"file-1", "batch", "in.jsonl", 1234, dir.path() / "files" / "file-1", 1000};
        s.add_file(f);
        s.add_batch(batch("batch_a"), items(3));
        s.set_status("batch_a", BatchStatus::in_progress, 1005);
    }
    Store again(db());
    const auto f = again.file("file-1");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->bytes, 1234u);
    EXPECT_EQ(f->filename, "in.jsonl");
    const auto b = again.batch("batch_a");
    ASSERT_TRUE(b);
    EXPECT_EQ(b->status, BatchStatus::in_progress);
    EXPECT_EQ(b->in_progress_at, 1005);
    EXPECT_FALSE(b->completed_at);
    EXPECT_EQ(again.counts("batch_a").total, 3);
    EXPECT_EQ(again.counts("batch_a").queued, 3);
    EXPECT_TRUE(again.remove_file("file-1"));
    EXPECT_FALSE(again.file("file-1"));
    EXPECT_FALSE(again.remove_file("file-1"));
}

TEST_F(StoreTest, AnItemRunsThenEndsWithItsResultAndIsNeverQueuedAgain) {
    Store s(db());
    s.add_batch(batch("b"), items(2));
    const auto first = s.next_queued("b");
    ASSERT_TRUE(first);
    EXPECT_EQ(first->line, 1);
    EXPECT_EQ(first->line_offset, 100u);
    ASSERT_TRUE(s.start_item("b", 1));
    EXPECT_FALSE(s.start_item("b", 1)) << "a running item cannot start twice";
    EXPECT_EQ(s.next_queued("b")->line, 2);
    ASSERT_TRUE(s.finish_item("b", 1, 200, R"({"choices":[]})", ""));
    EXPECT_FALSE(s.finish_item("b", 1, 200, "{}", "")) << "a finished item cannot finish twice";
    ASSERT_TRUE(s.start_item("b", 2));
    ASSERT_TRUE(s.finish_item("b", 2, 400, R"({"error":{}})", ""));
    EXPECT_FALSE(s.next_queued("b"));
    const auto c = s.counts("b");
    EXPECT_EQ(c.done, 1);
    EXPECT_EQ(c.failed, 1);
    std::vector<ItemRecord> seen;
    s.each_item("b", [&](const ItemRecord& i) { seen.push_back(i); });
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].state, ItemState::done);
    EXPECT_EQ(seen[0].result, R"({"choices":[]})");
    EXPECT_EQ(seen[1].state, ItemState::failed);
    EXPECT_EQ(seen[1].status_code, 400);
}

TEST_F(StoreTest, AfterACrashARunningItemRunsOnceMoreAndNotAThirdTime) {
    {
        Store s(db());
        s.add_batch(batch("b"), items(3));
        s.start_item("b", 1);
        s.finish_item("b", 1, 200, "{}", "");
        s.start_item("b", 2);  // in flight when loch is killed
    }
    {
        Store s(db());
        EXPECT_EQ(s.recover(), std::make_pair(std::size_t{1}, std::size_t{0}));
        const auto next = s.next_queued("b");
        ASSERT_TRUE(next);
        EXPECT_EQ(next->line, 2) << "the interrupted item goes first, the finished one never again";
        EXPECT_EQ(next->attempts, 1);
        s.start_item("b", 2);  // and killed again
    }
    Store s(db());
    EXPECT_EQ(s.recover(), std::make_pair(std::size_t{0}, std::size_t{1}));
    std::vector<ItemRecord> seen;
    s.each_item("b", [&](const ItemRecord& i) { seen.push_back(i); });
    EXPECT_EQ(seen[0].state, ItemState::done);
    EXPECT_EQ(seen[1].state, ItemState::failed);
    EXPECT_NE(seen[1].error.find("interrupted_twice"), std::string::npos);
    EXPECT_EQ(seen[2].state, ItemState::queued);
}

TEST_F(StoreTest, APreemptedItemGoesBackWithoutAnAttemptCounted) {
    Store s(db());
    s.add_batch(batch("b"), items(1));
    s.start_item("b", 1);
    EXPECT_TRUE(s.requeue_item("b", 1));
    EXPECT_EQ(s.next_queued("b")->attempts, 0);
    EXPECT_FALSE(s.requeue_item("b", 1)) << "only a running item can be requeued";
}

TEST_F(StoreTest, ACustomIdIsUniqueWithinABatchAndTheBatchIsAllOrNothing) {
    Store s(db());
    auto dup = items(2);
    dup[1].custom_id = dup[0].custom_id;
    EXPECT_ANY_THROW(s.add_batch(batch("b"), dup));
    EXPECT_FALSE(s.batch("b")) << "a failed insert leaves no half batch";
    s.add_batch(batch("c"), items(2));
    s.add_batch(batch("d"), items(2));  // the same custom_ids in another batch are fine
    EXPECT_EQ(s.counts("d").total, 2);
}

TEST_F(StoreTest, BatchesArePagedNewestFirst) {
    Store s(db());
    for (const char* id : {"b1", "b2", "b3", "b4"}) s.add_batch(batch(id), items(1));
    const auto page = s.batches("", 2);
    ASSERT_EQ(page.size(), 2u);
    EXPECT_EQ(page[0].id, "b4");
    EXPECT_EQ(page[1].id, "b3");
    const auto next = s.batches("b3", 10);
    ASSERT_EQ(next.size(), 2u);
    EXPECT_EQ(next[0].id, "b2");
    EXPECT_EQ(next[1].id, "b1");
}

TEST_F(StoreTest, TheOwnersCommitsNeverCheckpointAndACheckpointOnAnotherConnectionCopiesTheLog) {
    Store s(db());
    s.add_batch(batch("b"), items(60));
    const std::string result(100 * 1024, 'x');  // 6 MiB in all: SQLite would checkpoint after ~4 MiB of log
    for (int line = 1; line <= 60; ++line) {
        ASSERT_TRUE(s.start_item("b", line));
        ASSERT_TRUE(s.finish_item("b", line, 200, result, ""));
    }
    EXPECT_LT(std::filesystem::file_size(db()), 1'000'000u)
        << "the owner's commit checkpointed the log: an fsync on loch's loop";
    EXPECT_GT(Store::checkpoint(db()), 1000);
    EXPECT_GT(std::filesystem::file_size(db()), 6'000'000u);
    EXPECT_EQ(s.counts("b").done, 60) << "the owner goes on after a checkpoint elsewhere";
    s.add_batch(batch("c"), items(1));
    EXPECT_EQ(s.counts("c").queued, 1);
    EXPECT_THROW(Store::checkpoint(dir.path() / "missing.sqlite3"), std::runtime_error);
}

TEST_F(StoreTest, IdsAreNewEachTimeAndANewerSchemaIsRefusedWithTheFileNamed) {
    EXPECT_NE(Store::new_id("file-"), Store::new_id("file-"));
    EXPECT_TRUE(Store::new_id("batch_").starts_with("batch_"));
    { Store s(db()); }
    {
        SQLite::Database raw(db().string(), SQLite::OPEN_READWRITE);
        raw.exec("PRAGMA user_version=99");  // as a future loch would leave it
    }
    try {
        Store s(db());
        ADD_FAILURE() << "a newer schema was opened";
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(db().string()), std::string::npos) << what;
        EXPECT_NE(what.find("newer loch"), std::string::npos) << what;
    }
}

}  // namespace
}  // namespace loch::batch
