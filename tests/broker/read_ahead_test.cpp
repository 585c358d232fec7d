// The page cache in the broker's service (broker/file_cache.hpp): a model whose start waits has its files
// read ahead meanwhile where host memory allows, not where it does not; residency shows in /loch/status.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "broker/file_cache.hpp"
#include "broker_fixture.hpp"
#include "devices/page_cache.hpp"
#include "support/temp_dir.hpp"

namespace loch::broker {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using test_fixture::BrokerTest;
using test_fixture::fast;
using test_fixture::kGpu;

TEST(ReadAheadRule, OnlyWhatIsMissingAndOnlyWithinHalfOfWhatTheHostHasFree) {
    EXPECT_TRUE(worth_reading_ahead(4 * kGiB, 8 * kGiB));
    EXPECT_FALSE(worth_reading_ahead(4 * kGiB + 1, 8 * kGiB)) << "it would push other models' files out";
    EXPECT_FALSE(worth_reading_ahead(0, 8 * kGiB)) << "all resident: nothing to read";
    EXPECT_FALSE(worth_reading_ahead(1, 0));
}

constexpr std::uint64_t kFile = 16ull << 20;

class ReadAheadTest : public BrokerTest {
  protected:
    // A model whose command names a weights file that is not in the page cache.
    void add_model_with_file(const std::string& name) {
        add_model(name, 6 * kGiB);
        const auto file = dir.path() / (name + ".bin");
        {
            std::ofstream out(file, std::ios::binary);
            out << std::string(kFile, 'w');
        }
        const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
        auto c = std::make_shared<engines::CommandSettings>(
            *std::static_pointer_cast<const engines::CommandSettings>(cfg.models.back().settings));
        c->argv = {"/bin/true", file.string()};
        cfg.models.back().settings = c;
        files[name] = file;
    }
    void start_with_host(std::uint64_t host_bytes) {
        start_on({test_fixture::fake_gpu(10 * kGiB), test_fixture::fake_cpu(host_bytes)}, fast());
    }
    nlohmann::json status() {
        auto st = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
        settle(st);
        return st.get();
    }
    std::size_t events(const std::string& kind) {
        std::size_t n = 0;
        const auto st = status();  // kept: a range-for over status()["events"] would dangle
        for (const auto& e : st["events"]) n += e["kind"].get<std::string>() == kind ? 1 : 0;
        return n;
    }
    test::TempDir dir{"loch-read-ahead"};
    std::map<std::string, std::filesystem::path> files;
};

TEST_F(ReadAheadTest, AModelWaitingForRoomHasItsFilesReadAheadMeanwhile) {
    add_model_with_file("a");
    add_model_with_file("b");  // 6 + 6 GiB on a 10 GiB device: b waits while a is busy
    if (devices::resident(files["b"]).cached > kFile / 2) GTEST_SKIP() << "pages cannot be dropped here";
    start_with_host(64 * kGiB);
    Lease held = running("a");
    auto b = acquire("b");
    run_until([&] { return events("read_ahead_done") > 0; }, 5s);
    EXPECT_EQ(events("read_ahead"), 1u);
    ASSERT_EQ(events("read_ahead_done"), 1u);
    EXPECT_EQ(devices::resident(files["b"]).cached, kFile);
    EXPECT_NE(b.wait_for(0s), std::future_status::ready) << "still waiting: a is busy";
    const auto st = status();
    for (const auto& m : st["engines"])
        if (m["name"] == "b") {
            EXPECT_GE(m["files"]["cached_bytes"].get<std::uint64_t>(), kFile);
            EXPECT_EQ(m["files"]["source"], "measured");
        }
    EXPECT_GE(status()["page_cache"]["stopped_models"]["b"].get<std::uint64_t>(), kFile);
    held.release();
    ASSERT_TRUE(settle(b));
    EXPECT_TRUE(b.get().valid());
}

TEST_F(ReadAheadTest, NothingIsReadAheadWhenTheHostHasTooLittleFree) {
    add_model_with_file("a");
    add_model_with_file("b");
    if (devices::resident(files["b"]).cached > kFile / 2) GTEST_SKIP() << "pages cannot be dropped here";
    start_with_host(kFile);  // the file is more than half of what the host has free
    Lease held = running("a");
    auto b = acquire("b");
    run_for(500ms);
    EXPECT_EQ(events("read_ahead"), 0u);
    EXPECT_LT(devices::resident(files["b"]).cached, kFile);
    held.release();
    ASSERT_TRUE(settle(b));
}

TEST_F(ReadAheadTest, TurnedOffNothingIsReadAhead) {
    add_model_with_file("a");
    add_model_with_file("b");
    cfg.read_ahead = false;
    start_with_host(64 * kGiB);
    Lease held = running("a");
    auto b = acquire("b");
    run_for(300ms);
    EXPECT_EQ(events("read_ahead"), 0u);
    EXPECT_EQ(status()["page_cache"]["read_ahead"], false);
    held.release();
    ASSERT_TRUE(settle(b));
}

}  // namespace
}  // namespace loch::broker
