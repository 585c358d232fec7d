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

}  // namespace
}  // namespace loch::engines
