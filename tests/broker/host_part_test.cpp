// What a GPU engine also keeps in the host's RAM (Need::host_bytes, RequestCost::host_bytes: an image model
// whose flags keep components or phases on the CPU) is booked on `cpu` under the engine's holder, admitted
// with the device's part, and released with it.
#include "broker_fixture.hpp"

using namespace loch;
using namespace loch::broker;
using namespace loch::broker::test_fixture;

namespace {

// The test double of the sd kind's estimate: 4 GiB on the GPU, and `host` more in RAM beside it.
struct WithHostPart : FootprintSource {
    explicit WithHostPart(std::uint64_t host) : host(host) {}
    asio::awaitable<Footprint> estimate(const config::Config&, const config::ModelConfig& m,
                                        const std::vector<engines::Placement>& devices) override {
        Footprint f;
        for (const auto& d : devices) {
            Need n;
            n.device = d.device;
            n.bytes = m.memory.at("*");
            if (d.device != "cpu" && m.name == "flux") {
                n.host_bytes = host;
                n.host_why = "test double: weights kept in RAM";
            }
            f.needs.push_back(n);
        }
        co_return f;
    }
    std::uint64_t host;
};

class HostPartTest : public BrokerTest {
  protected:
    void start_gpu_and_host(std::uint64_t host_part, std::uint64_t ram = 32 * kGiB) {
        add_model("flux", 4 * kGiB);
        add_model("chat", 16 * kGiB);
        cfg.models.back().devices = {"cpu"};
        footprints = std::make_unique<WithHostPart>(host_part);
        start_on({fake_gpu(40 * kGiB), fake_cpu(ram)}, fast());
    }
    std::map<std::string, std::uint64_t> reserved(const std::string& holder) {
        auto st = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
        EXPECT_TRUE(settle(st));
        const auto status = st.get();
        std::map<std::string, std::uint64_t> out;
        for (const auto& d : status["devices"])
            for (const auto& r : d["reservations"])
                if (r["engine"] == holder) out[d["device"]] = r["figure"]["bytes"].get<std::uint64_t>();
        return out;
    }
};

}  // namespace

TEST_F(HostPartTest, AGpuEnginesRamIsBookedOnTheHostAndACpuModelThatNeedsItEvictsIt) {
    start_gpu_and_host(24 * kGiB);
    {
        Lease image = running("flux");
        EXPECT_EQ(reserved("flux"),
                  (std::map<std::string, std::uint64_t>{{kGpu, 4 * kGiB}, {"cpu", 24 * kGiB}}));
        {
            auto st = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
            ASSERT_TRUE(settle(st));
            const auto status = st.get();
            for (const auto& e : status["engines"])
                if (e["name"] == "flux") {
                    EXPECT_EQ(e["host_reservation"]["bytes"], 24 * kGiB) << e.dump();
                    EXPECT_EQ(e["footprint"]["needs"][0]["host"]["bytes"], 24 * kGiB) << e.dump();
                }
        }
        // 16 GiB for the chat model do not fit beside the image engine's 24 GiB of 32: it waits while the
        // image engine works …
        auto chat = acquire("chat");
        run_for(200ms);
        EXPECT_NE(chat.wait_for(0s), std::future_status::ready);
        image.release();
        // … and stops it once idle (both are a person's): the RAM is freed with the GPU's part.
        ASSERT_TRUE(settle(chat));
        EXPECT_TRUE(chat.get().valid());
    }
    EXPECT_TRUE(reserved("flux").empty());
    EXPECT_EQ(reserved("chat"), (std::map<std::string, std::uint64_t>{{"cpu", 16 * kGiB}}));
}

TEST_F(HostPartTest, AGpuModelWhoseRamPartCanNeverFitIsRefusedWithTheHostsNumbers) {
    start_gpu_and_host(48 * kGiB);
    auto image = acquire("flux");
    ASSERT_TRUE(settle(image, 2s));
    const auto e = error_of(image);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind(), ErrorKind::insufficient_memory) << e->what();
    EXPECT_NE(std::string(e->what()).find("cpu"), std::string::npos) << e->what();
    EXPECT_EQ(e->details()["need_bytes"], 48 * kGiB) << e->details().dump();
    EXPECT_NE(e->details()["need_detail"].get<std::string>().find("beside nvidia:0"), std::string::npos);
    EXPECT_TRUE(fake->of("flux").empty()) << "nothing started";
}

TEST_F(HostPartTest, ARequestsPhasesOnTheCpuAreBookedInRamAndReleasedWhenItEnds) {
    start_gpu_and_host(0);
    Lease chat = running("chat");  // 16 GiB of the 32 in RAM
    RequestNeeds n;
    n.transient = engines::RequestCost{};
    n.transient->bytes = 1 * kGiB;
    n.transient->host_bytes = 8 * kGiB;
    n.transient->host_why = "test double: the decoder on the CPU";
    auto first = asio::co_spawn(ioc, broker->acquire("flux", n), asio::use_future);
    ASSERT_TRUE(settle(first));
    Lease decoding = first.get();
    std::uint64_t on_host = 0;
    {
        auto st = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
        ASSERT_TRUE(settle(st));
        const auto status = st.get();
        for (const auto& d : status["devices"])
            if (d["device"] == "cpu")
                for (const auto& r : d["reservations"])
                    if (r["engine"] != "chat") on_host += r["figure"]["bytes"].get<std::uint64_t>();
    }
    EXPECT_EQ(on_host, 8 * kGiB);
    // A second such request does not fit the RAM left (32 − 16 − 8 < 8) while the chat model is busy.
    auto second = asio::co_spawn(ioc, broker->acquire("flux", n), asio::use_future);
    run_for(200ms);
    EXPECT_NE(second.wait_for(0s), std::future_status::ready);
    decoding.release();
    ASSERT_TRUE(settle(second));
    second.get().release();
    chat.release();
}
