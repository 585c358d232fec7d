// Conversations that survive an eviction (broker/saved_slots): which saved slot a prompt continues, what
// the disk limit drops, that a changed file or setting is another key, and what a restart finds on disk.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "broker/saved_slots.hpp"
#include "support/run_to_end.hpp"
#include "support/temp_dir.hpp"

namespace loch::broker {
namespace {

namespace fs = std::filesystem;

SavedEntry entry(std::string file, std::string prompt, std::uint64_t bytes = 100, std::int64_t at = 0,
                 std::string key = "k") {
    return {std::move(key), std::move(file), std::move(prompt), 10, bytes, at};
}

const std::string kLong(400, 'a');  // longer than the least worth restoring (256 bytes)

TEST(SavedSlotsMatch, APromptThatContinuesASavedSlotPicksTheOneItContinuesFurthest) {
    const std::vector<SavedEntry> saved = {entry("short", kLong), entry("long", kLong + "bbbb" + kLong),
                                           entry("other", std::string(400, 'z'))};
    const auto m = best_match(saved, kLong + "bbbb" + kLong + " and the next question", {});
    ASSERT_TRUE(m);
    EXPECT_EQ(m->file, "long");
    // Skipped (already restored in this run): the next best.
    const auto n = best_match(saved, kLong + "bbbb" + kLong + " and more", {"long"});
    ASSERT_TRUE(n);
    EXPECT_EQ(n->file, "short");
}

TEST(SavedSlotsMatch, TooLittleInCommonIsNotWorthARestore) {
    // Half of the saved text at least, and 256 bytes at least.
    const std::vector<SavedEntry> saved = {entry("half", kLong + kLong)};
    EXPECT_FALSE(best_match(saved, kLong.substr(0, 399) + "x", {}));  // just under half
    EXPECT_TRUE(best_match(saved, kLong + "x", {}));                  // half
    const std::vector<SavedEntry> small = {entry("small", std::string(200, 'a'))};
    EXPECT_FALSE(best_match(small, std::string(200, 'a') + "more", {}));
    EXPECT_FALSE(best_match({}, kLong, {}));
}

TEST(SavedSlotsLimit, TheOldestGoFirstUntilTheRestFits) {
    const std::vector<SavedEntry> saved = {entry("c", "c" + kLong, 100, 3), entry("a", "a" + kLong, 100, 1),
                                           entry("b", "b" + kLong, 100, 2)};
    EXPECT_TRUE(over_limit(saved, 300).empty());
    const auto drop = over_limit(saved, 250);
    ASSERT_EQ(drop.size(), 1u);
    EXPECT_EQ(drop[0].file, "a");
    EXPECT_EQ(over_limit(saved, 0).size(), 3u);
}

TEST(SavedSlotsLimit, ALaterSaveOfTheSameConversationReplacesTheEarlierOneButOnlyForTheSameLaunch) {
    const std::vector<SavedEntry> saved = {entry("old", kLong, 100, 1), entry("new", kLong + " more", 100, 2),
                                           entry("elsewhere", kLong, 100, 0, "other-key")};
    const auto drop = over_limit(saved, 1000);
    ASSERT_EQ(drop.size(), 1u);
    EXPECT_EQ(drop[0].file, "old");
}

using test::run_to_end;

TEST(SlotKeys, AChangedSettingIsAnotherFolderAndAChangedModelFileEmptiesTheFolder) {
    test::TempDir dir("loch-slot-key");
    const auto model = dir.path() / "m.gguf";
    std::ofstream(model) << "weights";
    const std::vector<std::string> argv = {"/bin/true", "-m", model.string(), "-c", "4096"};
    EXPECT_EQ(slot_folder(argv), slot_folder(argv));
    EXPECT_EQ(slot_folder(argv).size(), 16u);
    auto other = argv;
    other[4] = "8192";
    EXPECT_NE(slot_folder(argv), slot_folder(other));
    const auto id = launch_identity(argv);
    EXPECT_NE(id.find(model.string()), std::string::npos);

    SavedSlots store(dir.path() / "slots", config::SlotSaveConfig{});
    boost::asio::io_context io;
    ASSERT_TRUE(run_to_end(io, store.prepare(argv)));
    const auto folder = *store.folder(argv);
    std::ofstream(folder / "1-0.bin") << std::string(1000, 'x');
    run_to_end(io, store.add(slot_folder(argv), {{"1-0.bin", kLong, 10, 1000, 1.0}}));
    ASSERT_TRUE(run_to_end(io, store.prepare(argv)));  // the same launch again: kept
    EXPECT_TRUE(store.has(slot_folder(argv)));
    EXPECT_TRUE(fs::exists(folder / "1-0.bin"));
    // The same path, another file (its size and mtime differ): what the old one saved goes.
    const auto before = fs::last_write_time(model);
    std::ofstream(model) << "other weights";
    fs::last_write_time(model, before + std::chrono::seconds(2));
    EXPECT_NE(launch_identity(argv), id);
    ASSERT_TRUE(run_to_end(io, store.prepare(argv)));
    EXPECT_FALSE(store.has(slot_folder(argv)));
    EXPECT_FALSE(store.may_match(slot_folder(argv), "aaaa", {}));
    EXPECT_FALSE(fs::exists(folder / "1-0.bin"));
    EXPECT_FALSE(fs::exists(folder / "1-0.bin.json"));
}

TEST(SavedSlotsStore, WhatWasSavedIsFoundAgainAfterARestartAndAnOrphanedFileIsRemoved) {
    test::TempDir dir("loch-saved-slots");
    const auto root = dir.path() / "slots";
    config::SlotSaveConfig cfg;
    const std::vector<std::string> argv = {"/bin/true", "-c", "4096"};
    const auto key = slot_folder(argv);
    {
        SavedSlots store(root, cfg);
        boost::asio::io_context io;
        ASSERT_TRUE(run_to_end(io, store.prepare(argv)));
        const auto folder = *store.folder(argv);
        std::ofstream(folder / "1-0.bin") << std::string(1000, 'x');  // what the engine wrote
        std::ofstream(folder / "2-0.bin") << "never recorded";        // loch stopped before it recorded it
        const auto dropped = run_to_end(io, store.add(key, {{"1-0.bin", kLong, 10, 1000, 1.0}}));
        EXPECT_TRUE(dropped.empty());
        EXPECT_TRUE(store.has(key));
        EXPECT_TRUE(store.may_match(key, "aaaa", {}));
        EXPECT_FALSE(store.may_match(key, "zzzz", {}));
        EXPECT_FALSE(store.may_match(key, "aaaa", {"1-0.bin"}));
    }
    // A folder an older loch left (no launch.txt of this format) is removed at start.
    fs::create_directories(root / "0123456789abcdef");
    std::ofstream(root / "0123456789abcdef" / "launch.txt") << "/bin/true\x1f";
    std::ofstream(root / "0123456789abcdef" / "1-0.bin.json") << R"({"file":"1-0.bin","prompt":"x"})";
    SavedSlots again(root, cfg);
    EXPECT_TRUE(again.has(key));
    const auto m = again.match(key, kLong + " next", {});
    ASSERT_TRUE(m);
    EXPECT_EQ(m->file, "1-0.bin");
    EXPECT_EQ(m->bytes, 1000u);  // the file's size on disk
    EXPECT_FALSE(fs::exists(root / key / "2-0.bin"));
    EXPECT_FALSE(fs::exists(root / "0123456789abcdef"));
    EXPECT_EQ(again.status()["files"], 1);
}

TEST(SavedSlotsStore, OverTheDiskLimitTheOldestFilesAreDeleted) {
    test::TempDir dir("loch-saved-slots");
    config::SlotSaveConfig cfg;
    cfg.max_disk = 1500;
    SavedSlots store(dir.path() / "slots", cfg);
    const std::vector<std::string> argv = {"/bin/true"};
    const auto key = slot_folder(argv);
    boost::asio::io_context io;
    ASSERT_TRUE(run_to_end(io, store.prepare(argv)));
    const auto folder = store.folder(argv);
    std::ofstream(*folder / "1-0.bin") << std::string(1000, 'x');
    run_to_end(io, store.add(key, {{"1-0.bin", "a" + kLong, 10, 1000, 1.0}}));
    // A later save (within the same millisecond, saves keep their order)
    std::ofstream(*folder / "2-0.bin") << std::string(1000, 'y');
    const auto dropped = run_to_end(io, store.add(key, {{"2-0.bin", "b" + kLong, 10, 1000, 1.0}}));
    ASSERT_EQ(dropped.size(), 1u);
    EXPECT_EQ(dropped[0].file, "1-0.bin");
    EXPECT_FALSE(fs::exists(*folder / "1-0.bin"));
    EXPECT_FALSE(fs::exists(*folder / "1-0.bin.json"));
    EXPECT_TRUE(fs::exists(*folder / "2-0.bin"));
    EXPECT_EQ(store.status()["bytes"], 1000);
}

TEST(SavedSlotsStore, OffOrWithoutAStateFolderNothingIsSaved) {
    test::TempDir dir("loch-saved-slots");
    config::SlotSaveConfig off;
    off.enabled = false;
    boost::asio::io_context io;
    const std::vector<std::string> argv = {"/bin/true"};
    SavedSlots off_store(dir.path() / "slots", off);
    EXPECT_FALSE(off_store.folder(argv));
    EXPECT_FALSE(run_to_end(io, off_store.prepare(argv)));
    EXPECT_FALSE(run_to_end(io, off_store.may_save("x")));
    EXPECT_FALSE(SavedSlots({}, config::SlotSaveConfig{}).folder(argv));  // no state_dir
    // A folder whose launch.txt names another launch (a hash collision) is never shared.
    SavedSlots store(dir.path() / "slots", config::SlotSaveConfig{});
    ASSERT_TRUE(run_to_end(io, store.prepare(argv)));
    const auto launch = *store.folder(argv) / "launch.txt";
    auto j = nlohmann::json::parse(std::ifstream(launch));
    j["argv"] = "another launch";
    std::ofstream(launch) << j.dump();
    EXPECT_FALSE(run_to_end(io, store.prepare(argv)));
}

}  // namespace
}  // namespace loch::broker
