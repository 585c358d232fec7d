// The broker test fixture: a broker on a fake GPU (10 GiB) with models of the `command` kind, started
// through the fake launcher (tests/broker/fake_launcher.hpp), in virtual time: the broker, its timers and the
// fake engines run on a core::ManualClock that the fixture moves from one timer's expiry to the next, running
// the loop in between. Nothing waits in real time; a test of minutes runs in milliseconds.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <future>

#include "broker/broker.hpp"
#include "broker/device_source.hpp"
#include "broker/footprint.hpp"
#include "core/clock.hpp"
#include "engines/kinds/command.hpp"
#include "fake_launcher.hpp"

namespace loch::broker::test_fixture {

namespace asio = boost::asio;
using namespace std::chrono_literals;

constexpr const char* kGpu = "nvidia:0";

// What the fake probe reports: a CUDA card of `total` bytes, and the host's RAM with nothing used.
inline DeviceSnapshot fake_gpu(std::uint64_t total, int ordinal = 0) {
    DeviceSnapshot gpu;
    gpu.id = "nvidia:" + std::to_string(ordinal);
    gpu.total = {total, Source::measured, "fake"};
    gpu.backend = "cuda";
    gpu.ordinal = ordinal;
    return gpu;
}
inline DeviceSnapshot fake_cpu(std::uint64_t total) {
    DeviceSnapshot cpu;
    cpu.id = "cpu";
    cpu.total = {total, Source::measured, "fake"};
    cpu.used = MemoryFigure{0, Source::measured, "fake"};
    return cpu;
}

class BrokerTest : public ::testing::Test {
  protected:
    void add_model(const std::string& name, std::uint64_t bytes,
                   config::Priority prio = config::Priority::interactive, bool exclusive = false) {
        config::ModelConfig m;
        m.name = name;
        m.engine = "command";
        auto c = std::make_shared<engines::CommandSettings>();
        c->argv = {"/bin/true"};
        c->health_path = "";
        m.settings = c;
        m.memory["*"] = bytes;
        m.devices = {kGpu};
        m.priority = prio;
        m.exclusive = exclusive;
        m.concurrency = 1;
        m.keep_alive.reset();  // forever: only admission evicts
        cfg.models.push_back(m);
    }

    void start(BrokerOptions o = {}, std::map<int, std::uint64_t> process_bytes = {},
               std::map<int, std::vector<int>> groups = {}) {
        DeviceSnapshot gpu = fake_gpu(10 * kGiB);
        gpu.process_bytes = std::move(process_bytes);
        start_on({gpu}, o, std::move(groups));
    }
    void start_on(std::vector<DeviceSnapshot> snapshot, BrokerOptions o = {},
                  std::map<int, std::vector<int>> groups = {}) {
        if (!o.clock) o.clock = &clock;
        if (!o.blocking_work) o.blocking_work = ioc.get_executor();
        // FixedDevices with process groups: a test double of the /proc scan.
        struct Devices : FixedDevices {
            Devices(std::vector<DeviceSnapshot> d, std::map<int, std::vector<int>> g,
                    std::map<int, devices::ProcessInfo> p, const std::optional<devices::MemoryCgroup>* c,
                    int* reads)
                : FixedDevices(std::move(d)),
                  groups(std::move(g)),
                  described(std::move(p)),
                  cgroup(c),
                  reads(reads) {}
            std::vector<DeviceSnapshot> snapshot() override {
                ++*reads;
                return FixedDevices::snapshot();
            }
            std::optional<devices::MemoryCgroup> memory_cgroup() override { return *cgroup; }
            std::vector<int> group_members(int pgid) override {
                auto it = groups.find(pgid);
                return it == groups.end() ? std::vector<int>{pgid} : it->second;
            }
            std::optional<devices::ProcessInfo> describe(int pid) override {
                auto it = described.find(pid);
                return it == described.end() ? std::nullopt : std::optional(it->second);
            }
            std::map<int, std::vector<int>> groups;
            std::map<int, devices::ProcessInfo> described;
            const std::optional<devices::MemoryCgroup>* cgroup;
            int* reads;
        };
        broker = std::make_unique<Broker>(ioc.get_executor(), cfg,
                                          std::make_unique<Devices>(std::move(snapshot), std::move(groups),
                                                                    process_info, &cgroup, &device_reads),
                                          footprints ? std::move(footprints) : loop_footprints(),
                                          std::make_unique<test::FakeLauncher>(fake, *o.clock), o);
        broker->start();
    }

    void TearDown() override {
        if (!broker) return;
        auto done = asio::co_spawn(ioc, broker->shutdown(), asio::use_future);
        settle(done);
        broker.reset();
        run_for(10ms);
    }
    // The models' kinds, estimated on the test's loop rather than a worker thread.
    std::unique_ptr<FootprintSource> loop_footprints() {
        return std::make_unique<KindFootprint>(std::filesystem::path{}, ioc.get_executor());
    }

    std::future<Lease> acquire(const std::string& model, RequestNeeds needs = {}) {
        return asio::co_spawn(ioc, broker->acquire(model, std::move(needs)), asio::use_future);
    }
    // A request that needs `bytes` of compute of its own beside the model (an image at some size).
    std::future<Lease> acquire_with_compute(const std::string& model, std::uint64_t bytes, std::string why) {
        RequestNeeds needs;
        engines::RequestCost cost;
        cost.bytes = bytes;
        cost.why = std::move(why);
        needs.transient = cost;
        return acquire(model, std::move(needs));
    }
    // A request granted now (or within 10 s): its lease, held until released. An empty lease (a test
    // failure) when it was not granted.
    Lease running(const std::string& model) {
        auto f = acquire(model);
        EXPECT_TRUE(settle(f)) << "'" << model << "' was not granted";
        return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready ? f.get() : Lease{};
    }
    // Runs the broker until `f` is ready, or `limit` of virtual time passed.
    template <class F>
    bool settle(F& f, std::chrono::milliseconds limit = 10s) {
        return run_until([&] { return f.wait_for(0s) == std::future_status::ready; }, limit);
    }
    // Runs the loop until nothing is ready to run, then moves the clock to the next timer's expiry, and
    // again, until `done()` or `limit` of virtual time has passed (then the clock stands at the limit).
    template <class Done>
    bool run_until(Done done, std::chrono::milliseconds limit) {
        const auto until = clock.now() + limit;
        for (;;) {
            ioc.restart();
            ioc.poll();
            if (done()) return true;
            const auto next = clock.next_expiry();
            if (next > until) break;
            clock.advance_to(next);
        }
        clock.advance_to(until);
        ioc.restart();
        ioc.poll();
        return done();
    }
    // /loch/status's engine entry of `name` now; null (and a test failure) when it is not listed.
    nlohmann::json engine_status(const std::string& name) {
        auto st = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
        if (!settle(st)) return nullptr;
        const nlohmann::json status = st.get();
        for (const auto& e : status["engines"])
            if (e["name"] == name) return e;
        ADD_FAILURE() << "no engine '" << name << "' in " << status.dump();
        return nullptr;
    }
    // Lets `d` of virtual time pass, running everything due meanwhile.
    void run_for(std::chrono::milliseconds d) {
        run_until([] { return false; }, d);
    }
    // The broker::Error the request ended with; nullopt (a test failure) when it was served instead.
    template <class T>
    std::optional<Error> error_of(std::future<T>& f) {
        try {
            f.get();
        } catch (const Error& e) {
            return e;
        }
        ADD_FAILURE() << "served, not refused";
        return std::nullopt;
    }
    template <class T>
    ErrorKind error_kind(std::future<T>& f) {
        const auto e = error_of(f);
        return e ? e->kind() : ErrorKind::internal;
    }

    core::ManualClock clock;  // the broker's and the fake engines' time (outlives the loop's timers)
    asio::io_context ioc;
    config::Config cfg;
    std::unique_ptr<FootprintSource> footprints;  // null: the models' kinds
    std::shared_ptr<test::FakeLauncher::Shared> fake = std::make_shared<test::FakeLauncher::Shared>();
    std::unique_ptr<Broker> broker;
    std::map<int, devices::ProcessInfo> process_info;  // who the fake device's processes are
    std::optional<devices::MemoryCgroup> cgroup;       // what the memory cgroup reads (none: not in one)
    int device_reads = 0;                              // how often the broker read the devices (its ticks)
};

inline BrokerOptions fast(std::chrono::seconds aging = 30s) {
    BrokerOptions o;
    o.tick = 20ms;
    o.idle_tick = 100ms;
    o.aging = aging;
    o.free_wait = 1s;
    return o;
}

}  // namespace loch::broker::test_fixture
