// core/file_sink: the loop goes on while the disk makes a write wait, the bytes arrive whole and in order,
// and a full disk is reported as such (ENOSPC), not as a vague I/O failure.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include "core/file_sink.hpp"
#include "support/temp_dir.hpp"

namespace asio = boost::asio;
using loch::core::FileSink;

namespace {

std::string pattern(std::size_t n, char seed) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i % 61);
    return s;
}

}  // namespace

TEST(FileSink, PiecesArriveWholeAndInOrderAndSmallOnesWaitForAMiB) {
    loch::test::TempDir dir("loch-file-sink");
    const auto path = dir.path() / "upload.part";
    asio::io_context io;
    asio::thread_pool pool(1);
    std::string expected;
    auto done = asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto sink = co_await FileSink::open(pool, path);
            std::string piece;
            for (int i = 0; i < 40; ++i) {
                const auto bytes = pattern(100'000 + i, static_cast<char>('A' + i % 20));
                expected += bytes;
                piece += bytes;
                co_await sink.take(piece, false);
                // Under a MiB it is kept; at a MiB it is written and the buffer handed back empty.
                EXPECT_LT(piece.size(), FileSink::kChunk);
            }
            EXPECT_LT(sink.written(), expected.size());  // the last piece is still held
            co_await sink.take(piece, true);
            EXPECT_TRUE(piece.empty());
            EXPECT_EQ(sink.written(), expected.size());
        },
        asio::use_future);
    io.run();
    done.get();
    std::ifstream in(path, std::ios::binary);
    const std::string got{std::istreambuf_iterator<char>(in), {}};
    EXPECT_TRUE(got == expected) << got.size() << " bytes read back of " << expected.size();
}

// A FIFO nobody reads yet stands for a disk that makes open() and write() wait (dirty-page throttling, a
// network disk): the loop's timers must fire meanwhile. Done on the loop thread, this test never ends.
TEST(FileSink, TheLoopKeepsRunningWhileTheDiskMakesAWriteWait) {
    loch::test::TempDir dir("loch-file-sink");
    const auto fifo = dir.path() / "slow-disk";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    asio::io_context io;
    asio::thread_pool pool(1);
    int ticks_while_waiting = 0;
    bool written = false;
    const std::string bytes = pattern(3 * FileSink::kChunk, 'a');
    auto done = asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto sink = co_await FileSink::open(pool, fifo);
            std::string piece = bytes;
            co_await sink.take(piece, true);
            written = true;
        },
        asio::use_future);
    asio::steady_timer tick(io);
    std::function<void()> arm = [&] {
        tick.expires_after(std::chrono::milliseconds(10));
        tick.async_wait([&](boost::system::error_code ec) {
            if (ec || written) return;
            ++ticks_while_waiting;
            arm();
        });
    };
    arm();
    // The reader comes 300 ms later, from another thread, and drains the pipe.
    std::string got;
    std::thread reader([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        const int fd = ::open(fifo.c_str(), O_RDONLY | O_CLOEXEC);
        char buf[65536];
        for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
        ::close(fd);
    });
    io.run();
    reader.join();
    done.get();
    EXPECT_GE(ticks_while_waiting, 10) << "the loop stood still while the file's open/write waited";
    EXPECT_TRUE(got == bytes) << got.size() << " bytes through the pipe of " << bytes.size();
}

TEST(FileSink, AFullDiskIsReportedAsNoSpaceNamingTheFile) {
    asio::io_context io;
    asio::thread_pool pool(1);
    auto done = asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto sink = co_await FileSink::open(pool, "/dev/full");
            std::string piece = pattern(FileSink::kChunk, 'x');
            co_await sink.take(piece, false);
        },
        asio::use_future);
    io.run();
    try {
        done.get();
        FAIL() << "a write to /dev/full succeeded";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), ENOSPC) << e.what();
        EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
    }
}
