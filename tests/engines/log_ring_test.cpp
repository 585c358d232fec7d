#include "engines/log_ring.hpp"

#include <gtest/gtest.h>

namespace loch::engines {
namespace {

TEST(LogRing, JoinsChunksIntoLinesAndKeepsTheLastN) {
    LogRing ring(3, 100);
    EXPECT_TRUE(ring.append("par").empty());
    const auto lines = ring.append("tial\r\nsecond\nthi");
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0], "partial");
    EXPECT_EQ(lines[1], "second");
    ring.append("rd\nfourth\n");
    EXPECT_EQ(ring.size(), 3u);
    EXPECT_EQ(ring.total_lines(), 4u);
    EXPECT_EQ(ring.lines(), (std::vector<std::string>{"second", "third", "fourth"}));
    EXPECT_EQ(ring.tail(1), std::vector<std::string>{"fourth"});
    EXPECT_EQ(ring.tail(99).size(), 3u);
    ring.append("no newline at EOF");
    EXPECT_EQ(ring.finish(), std::vector<std::string>{"no newline at EOF"});
    EXPECT_EQ(ring.tail(1), std::vector<std::string>{"no newline at EOF"});
}

TEST(LogRing, BoundsLineLength) {
    LogRing ring(10, 8);
    ring.append(std::string(1000, 'x'));
    ring.append(std::string(1000, 'y') + "\n");
    ASSERT_EQ(ring.size(), 1u);
    EXPECT_EQ(ring.lines()[0], "xxxxxxxx");
}

// sd-server draws its progress bar as "\r<bar> i/n - x s/it\033[K" per step and a newline after the last
// one; the dashboard showed the raw redraws and control codes. The ring keeps what a terminal shows.
TEST(LogRing, KeepsWhatATerminalShowsOfProgressBarsAndColours) {
    LogRing ring(10, 4096);
    std::vector<std::string> done;
    for (int step = 1; step <= 20; ++step) {
        const std::string redraw = "\r  |" + std::string(std::size_t(step), '=') + ">| " +
                                   std::to_string(step) + "/20 - 1.25s/it\033[K" + (step == 20 ? "\n" : "");
        // Arbitrary chunking, the carriage return alone at a chunk's end included.
        const auto a = ring.append(redraw.substr(0, 1)), b = ring.append(redraw.substr(1));
        done.insert(done.end(), a.begin(), a.end());
        done.insert(done.end(), b.begin(), b.end());
    }
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0], "  |====================>| 20/20 - 1.25s/it");
    ring.append("\x1b[32m[INFO ]\x1b[0m loaded\r\n");  // colours and a CRLF line end
    EXPECT_EQ(ring.tail(1).at(0), "[INFO ] loaded");
    // A long run of redraws never fills the line's room with stale states.
    for (int i = 0; i < 10000; ++i) ring.append("\rstep " + std::to_string(i));
    ring.append("\n");
    EXPECT_EQ(ring.tail(1).at(0), "step 9999");
}

}  // namespace
}  // namespace loch::engines
