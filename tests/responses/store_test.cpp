// The stored responses (issue 53): kept, read back, deleted; older than the age or beyond the size, gone —
// oldest first.
#include "responses/store.hpp"

#include <gtest/gtest.h>

#include "support/temp_dir.hpp"

namespace loch::responses {
namespace {

StoredResponse response(const std::string& id, std::int64_t at, std::size_t size = 10) {
    return {id, at, "m", std::string(size, 'r'), "[]", "[]"};
}

TEST(ResponsesStore, KeepsReadsAndDeletes) {
    test::TempDir dir("loch-responses");
    Store s(dir.path() / "db.sqlite3");
    EXPECT_EQ(s.put(response("resp_a", 100), 100), 0u);
    const auto got = s.get("resp_a");
    ASSERT_TRUE(got);
    EXPECT_EQ(got->created_at, 100);
    EXPECT_EQ(got->response, std::string(10, 'r'));
    EXPECT_FALSE(s.get("resp_b"));
    EXPECT_TRUE(s.remove("resp_a"));
    EXPECT_FALSE(s.remove("resp_a"));
    EXPECT_FALSE(s.get("resp_a"));
}

TEST(ResponsesStore, OlderThanTheAgeOrBeyondTheSizeGoesOldestFirst) {
    test::TempDir dir("loch-responses");
    // 14 bytes each (10 + "[]" + "[]"); at most 30: two fit.
    Store s(dir.path() / "db.sqlite3", Retention{1000, 30});
    s.put(response("old", 100), 100);
    s.put(response("mid", 200), 200);
    EXPECT_EQ(s.put(response("new", 300), 300), 1u);  // over the size: the oldest goes
    EXPECT_FALSE(s.get("old"));
    EXPECT_TRUE(s.get("mid"));
    EXPECT_TRUE(s.get("new"));
    EXPECT_EQ(s.bytes(), 28u);
    // Past the age (1000 s after it was made).
    EXPECT_EQ(s.put(response("later", 1250, 1), 1250), 1u);
    EXPECT_FALSE(s.get("mid"));
    EXPECT_TRUE(s.get("new"));
    // The same file, opened again: still there (the batch store's database is shared by both).
    Store again(dir.path() / "db.sqlite3");
    EXPECT_TRUE(again.get("later"));
    EXPECT_EQ(again.bytes(), s.bytes());  // the total kept by every write is the table's
    // One of the same id replaces the other: its bytes are counted once.
    again.put(response("later", 1250, 3), 1250);
    EXPECT_EQ(again.bytes(), 14u + 7u);
}

}  // namespace
}  // namespace loch::responses
