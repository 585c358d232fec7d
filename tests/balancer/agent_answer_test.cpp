// balancer/agent_answer: the line HAProxy's agent-check gets for each way a model can stand on this box, in
// HAProxy's own words (its agent parser: weights, up/down, ready/drain, maxconn:, '#' description).
#include <gtest/gtest.h>

#include "balancer/agent_answer.hpp"

namespace loch::balancer {
namespace {

using broker::Outlook;
using Fit = Outlook::Fit;

Outlook resident(std::uint32_t slots, std::uint32_t active, std::uint64_t queued = 0) {
    Outlook o;
    o.fit = Fit::resident;
    o.slots = slots;
    o.active = active;
    o.queued = queued;
    o.queue_limit = 8;
    return o;
}

Outlook fits(Fit f, double share) {
    Outlook o;
    o.fit = f;
    o.slots = 2;
    o.queue_limit = 8;
    o.free_share_after = share;
    return o;
}

int weight_of(const std::string& line) {
    const auto pct = line.find('%');
    if (pct == std::string::npos) return -1;
    auto start = line.rfind(' ', pct);
    return std::stoi(line.substr(start + 1, pct - start - 1));
}

TEST(AgentQuestion, TheModelThenOptionalTierAndKey) {
    const auto q = parse_agent_question("llama-8b resident key=s3cret\r\n");
    ASSERT_TRUE(q);
    EXPECT_EQ(q->model, "llama-8b");
    EXPECT_TRUE(q->resident_tier);
    EXPECT_EQ(q->key, "s3cret");
    const auto plain = parse_agent_question("flux\n");
    ASSERT_TRUE(plain);
    EXPECT_EQ(plain->model, "flux");
    EXPECT_FALSE(plain->resident_tier);
    EXPECT_FALSE(plain->key);
    EXPECT_FALSE(parse_agent_question(""));
    EXPECT_FALSE(parse_agent_question("  \r\n"));
    EXPECT_FALSE(parse_agent_question("flux something-else"));
}

TEST(AgentAnswer, ResidentWithAFreeSlotIsFullWeightAndSaysReadyUpAndItsMaxconn) {
    const auto a = agent_answer(resident(4, 1), false);
    EXPECT_EQ(a.rfind("ready up 100% maxconn:12 #", 0), 0u) << a;
    EXPECT_EQ(a.back(), '\n');
    EXPECT_EQ(a.find('\n'), a.size() - 1) << "one line";
}

TEST(AgentAnswer, ABusyResidentModelWeighsLessAsItsQueueFillsAndDrainsWhenFull) {
    const int empty = weight_of(agent_answer(resident(2, 2, 0), false));
    const int half = weight_of(agent_answer(resident(2, 2, 4), false));
    const int nearly = weight_of(agent_answer(resident(2, 2, 7), false));
    EXPECT_LT(empty, 100);
    EXPECT_GT(empty, half);
    EXPECT_GT(half, nearly);
    EXPECT_GE(nearly, 1);
    const auto full = agent_answer(resident(2, 2, 8), false);
    EXPECT_EQ(full.rfind("drain ", 0), 0u) << full;
    EXPECT_NE(full.find("queue full"), std::string::npos);
}

TEST(AgentAnswer, ABoxWhereItIsResidentOutweighsEveryBoxWhereItWouldHaveToLoad) {
    const int resident_busy = weight_of(agent_answer(resident(2, 2, 0), false));
    const int best_fit = weight_of(agent_answer(fits(Fit::fits_now, 1.0), false));
    const int worst_fit = weight_of(agent_answer(fits(Fit::fits_now, 0.0), false));
    const int evicting = weight_of(agent_answer(fits(Fit::fits_evicting, 1.0), false));
    const int later = weight_of(agent_answer(fits(Fit::fits_later, 0.0), false));
    EXPECT_EQ(weight_of(agent_answer(resident(2, 0), false)), 100);
    EXPECT_GE(resident_busy, best_fit);
    EXPECT_GT(best_fit, worst_fit) << "more memory left after loading weighs more";
    EXPECT_GE(worst_fit, evicting);
    EXPECT_GT(evicting, later - 1);
    EXPECT_EQ(later, 1);
}

TEST(AgentAnswer, NeverFittingOrUnknownIsDownWithTheReason) {
    Outlook never = fits(Fit::never, 0);
    never.why = "needs 40.0 GiB on cpu;\nhas 24.0 GiB";
    const auto a = agent_answer(never, false);
    EXPECT_EQ(a.rfind("down #never fits here: needs 40.0 GiB", 0), 0u) << a;
    EXPECT_EQ(a.find('\n'), a.size() - 1) << "the reason's newline must not end the line early";
    EXPECT_EQ(agent_answer(Outlook{}, false).rfind("down ", 0), 0u);
    EXPECT_EQ(agent_answer(Outlook{}, true).rfind("down ", 0), 0u);
}

TEST(AgentAnswer, TheResidentTierDrainsWhereTheModelIsNotResident) {
    EXPECT_EQ(agent_answer(fits(Fit::fits_now, 1.0), true).rfind("drain ", 0), 0u);
    EXPECT_EQ(agent_answer(fits(Fit::planning, 0), true).rfind("drain ", 0), 0u);
    EXPECT_EQ(agent_answer(resident(2, 0), true).rfind("ready up 100%", 0), 0u);
    EXPECT_EQ(agent_answer(resident(2, 2, 8), true).rfind("drain ", 0), 0u)
        << "a full queue drains both tiers";
}

TEST(AgentAnswer, WhileItsMemoryIsEstimatedItIsUpAtTheLowestWeight) {
    const auto a = agent_answer(fits(Fit::planning, 0), false);
    EXPECT_EQ(a.rfind("ready up 1% ", 0), 0u) << a;
}

}  // namespace
}  // namespace loch::balancer
