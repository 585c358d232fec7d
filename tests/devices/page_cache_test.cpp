// Model files in the page cache (devices/page_cache): residency as mincore sees it, and a read-ahead that
// reads only what is missing and stops when told. Needs a file system whose clean pages can be dropped
// (POSIX_FADV_DONTNEED): skipped, with the reason, on one that cannot (tmpfs).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "devices/page_cache.hpp"
#include "support/temp_dir.hpp"

namespace loch::devices {
namespace {

constexpr std::uint64_t kSize = 24ull << 20;

// Writes the file, syncs it and asks the kernel to drop its pages; whether it did is the caller's check.
void write_and_drop(const std::filesystem::path& p) {
    {
        std::ofstream out(p, std::ios::binary);
        const std::string block(1 << 20, 'w');
        for (std::uint64_t i = 0; i < kSize / block.size(); ++i) out << block;
    }
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

TEST(PageCache, AReadAheadBringsTheMissingPagesInAndReadsNothingTwice) {
    test::TempDir dir("loch-page-cache");
    const auto file = dir.path() / "weights.bin";
    write_and_drop(file);
    const auto before = resident(file);
    EXPECT_EQ(before.bytes, kSize);
    if (before.cached > kSize / 2) GTEST_SKIP() << "this file system keeps the pages (tmpfs?)";

    const auto read = read_ahead(file, [] { return true; });
    EXPECT_GE(read, kSize - before.cached);
    EXPECT_LE(read, kSize);
    EXPECT_EQ(resident(file).cached, kSize);
    EXPECT_EQ(read_ahead(file, [] { return true; }), 0u) << "every page was there: nothing to read";
}

TEST(PageCache, AReadAheadToldToStopReadsNoMore) {
    test::TempDir dir("loch-page-cache");
    const auto file = dir.path() / "weights.bin";
    write_and_drop(file);
    if (resident(file).cached > kSize / 2) GTEST_SKIP() << "this file system keeps the pages (tmpfs?)";
    int chunks = 0;
    const auto read = read_ahead(file, [&] { return ++chunks <= 1; });  // one chunk, then stop
    EXPECT_GT(read, 0u);
    EXPECT_LT(read, kSize);
    EXPECT_LT(resident(file).cached, kSize);
}

TEST(PageCache, WhatIsNotARegularFileHasNothingResidentAndNothingToRead) {
    test::TempDir dir("loch-page-cache");
    EXPECT_EQ(resident(dir.path() / "missing").bytes, 0u);
    EXPECT_EQ(resident(dir.path()).bytes, 0u);  // a folder
    EXPECT_EQ(read_ahead(dir.path() / "missing", [] { return true; }), 0u);
    const auto fifo = dir.path() / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_EQ(read_ahead(fifo, [] { return true; }), 0u);  // and no hang: it is opened without blocking
    std::ofstream(dir.path() / "empty");
    EXPECT_EQ(resident(dir.path() / "empty").bytes, 0u);
}

}  // namespace
}  // namespace loch::devices
