// The reservation rule's arithmetic and what an out-of-memory line teaches (pure).
#include <gtest/gtest.h>

#include "broker/broker.hpp"
#include "broker/footprint.hpp"

using namespace loch;
using namespace loch::broker;

TEST(ReservationRule, TheLargestCandidateWinsAndNamesItsSource) {
    const auto f = largest_of({{"loch plan", {9 * kGiB, Source::formula, ""}},
                               {"dry run + what it leaves out", {3 * kGiB, Source::engine_dry_run, ""}},
                               {"measured peak", {8 * kGiB, Source::measured, ""}}});
    EXPECT_EQ(f.bytes, 9 * kGiB);
    EXPECT_EQ(f.source, Source::formula);
    EXPECT_NE(f.detail.find("dry run"), std::string::npos);
    EXPECT_NE(f.detail.find("→ loch plan"), std::string::npos) << f.detail;
    EXPECT_EQ(largest_of({}).bytes, 0u);
}

TEST(ReservationRule, FailedAllocationSizeIsReadFromTheOomLine) {
    EXPECT_EQ(
        failed_allocation_bytes("allocating 163840.00 MiB on device 0: cudaMalloc failed: out of memory"),
        163840ull * kMiB);
    EXPECT_EQ(
        failed_allocation_bytes("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1.5 GiB failed"),
        static_cast<std::uint64_t>(1.5 * double(kGiB)));
    EXPECT_FALSE(failed_allocation_bytes("std::bad_alloc"));
}
