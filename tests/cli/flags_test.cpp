// Every numeric flag is range-checked and a bad value is named (before: `--port 70000` silently listened on
// 4464); the client commands say where they looked when no loch answers.
#include <gtest/gtest.h>

#include "devices/run_loch.hpp"

using loch::testing::run_loch;

TEST(Flags, OutOfRangeNumbersAreRefusedWithTheFlagsName) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"serve", "--port", "70000"}, "--port"},
        {{"serve", "--port", "65536"}, "--port"},
        {{"plan", "--preset", "tiny-llama", "--ngl", "70000000"}, "--ngl"},
        {{"plan", "--preset", "tiny-llama", "--margin-pct", "150"}, "--margin-pct"},
        {{"logs", "m", "-n", "0"}, "--lines"},
        {{"ps", "--url", "127.0.0.1:70000"}, "--url"}};
    for (const auto& [args, flag] : cases) {
        const auto r = run_loch(args, {}, true);
        EXPECT_NE(r.status, 0) << flag;
        EXPECT_NE(r.out.find(flag), std::string::npos) << r.out;
    }
}

TEST(Flags, AClientCommandWithoutALochSaysWhereItLooked) {
    const auto r = run_loch({"ps", "--url", "127.0.0.1:1"}, {}, true);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.out.find("cannot reach loch at http://127.0.0.1:1"), std::string::npos) << r.out;
}

TEST(Flags, LochUrlInTheEnvironmentIsTheAddressWithoutUrlOrConfig) {
    auto r = run_loch({"ps"}, {"LOCH_URL=http://127.0.0.1:2"}, true);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.out.find("cannot reach loch at http://127.0.0.1:2"), std::string::npos) << r.out;
    r = run_loch({"ps", "--url", "127.0.0.1:1"}, {"LOCH_URL=http://127.0.0.1:2"}, true);  // the flag wins
    EXPECT_NE(r.out.find("cannot reach loch at http://127.0.0.1:1"), std::string::npos) << r.out;
}
