// broker/read_ahead — the page cache in the broker's service (broker/file_cache.hpp says what and why):
// which files a model's launch reads, reading them ahead for a start that waits, their residency measured
// on the tick, and the view /loch/status shows. Member functions of Broker (broker.hpp).
#include <algorithm>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "broker/broker.hpp"
#include "broker/model_state.hpp"

namespace loch::broker {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {
// Residency of every model's files (mincore over each: ~1 ms per 4 GiB mapped): every 30 s while work goes
// on, every 5 minutes while idle — only memory pressure or another reader changes it then, and an idle loch
// should cost ~nothing (issue 55).
constexpr auto kMeasureEvery = 30s;
constexpr auto kMeasureEveryIdle = 5min;
// One read-ahead per model between two of its loads, or per minute: a pump that runs again and again while
// a request waits must not re-read what the kernel dropped under pressure.
constexpr auto kReadAgainAfter = 60s;
}  // namespace

// Every regular file the launch names by an absolute path — weights, projector, VAE, the engine binary —
// except loch's own (logs, slot folders under the state and log folders).
std::vector<fs::path> Broker::files_of(const Model& m, const std::string& device) const {
    std::vector<fs::path> out;
    try {
        const auto spec = engines::make_engine_spec(*cfg_, *m.cfg, placement_of(device), 1);
        for (const auto& a : spec.argv) {
            if (a.empty() || a.front() != '/') continue;
            const fs::path p(a);
            const auto inside = [&](const fs::path& dir) {
                return !dir.empty() && std::ranges::mismatch(dir, p).in1 == dir.end();
            };
            if (inside(cfg_->state_dir) || inside(cfg_->log_dir) || std::ranges::find(out, p) != out.end())
                continue;
            out.push_back(p);
        }
    } catch (const std::exception&) {
        // a launch that cannot be built reads no files
    }
    return out;
}

void Broker::read_ahead_for(Model& m, const std::string& device, std::string_view why) {
    if (!cfg_->read_ahead || !policy_->reads_ahead() || shutting_down_ || m.reading_ahead ||
        m.state != ModelState::stopped || !ledger_.has_device("cpu"))
        return;
    const auto now = this->now();
    if (m.read_ahead_at != Clock::time_point{} && now - m.read_ahead_at < kReadAgainAfter) return;
    auto files = files_of(m, device);
    if (files.empty()) return;
    m.reading_ahead = true;
    m.read_ahead_at = now;
    const std::uint64_t host_free = ledger_.free("cpu");
    auto alive = alive_;
    asio::co_spawn(
        ex_,
        [this, alive, &m, files = std::move(files), host_free,
         why = std::string(why)]() -> asio::awaitable<void> {
            const auto before = co_await file_cache_.measure(files);
            if (!*alive) co_return;
            m.files = before;
            const std::uint64_t missing = before.bytes - std::min(before.cached, before.bytes);
            if (!worth_reading_ahead(missing, host_free)) {
                m.reading_ahead = false;
                co_return;
            }
            note(
                "read_ahead", m,
                fmt::format("reading {} of its files into the page cache while {} ({} of {} there already)",
                            human_bytes(missing), why, human_bytes(before.cached), human_bytes(before.bytes)),
                {{"missing_bytes", missing}, {"host_free_bytes", host_free}});
            const auto r = co_await file_cache_.read_ahead(files);
            if (!*alive) co_return;
            const auto after = co_await file_cache_.measure(files);
            if (!*alive) co_return;
            m.files = after;
            m.reading_ahead = false;
            m.read_ahead_at = this->now();
            note("read_ahead_done", m,
                 fmt::format("read {} ahead in {:.2f} s; {} of {} in the page cache", human_bytes(r.bytes),
                             r.seconds, human_bytes(after.cached), human_bytes(after.bytes)),
                 {{"bytes", r.bytes}, {"seconds", r.seconds}, {"cached_bytes", after.cached}});
        },
        asio::detached);
}

void Broker::measure_files() {
    const auto now = this->now();
    if (measuring_files_ || shutting_down_ ||
        now - files_measured_at_ < (busy(now) ? kMeasureEvery : kMeasureEveryIdle))
        return;
    std::vector<std::pair<std::string, std::vector<fs::path>>> todo;
    for (const auto& [name, m] : models_)
        if (!m->retired) todo.emplace_back(name, files_of(*m, m->device.empty() ? "cpu" : m->device));
    measuring_files_ = true;
    files_measured_at_ = now;
    auto alive = alive_;
    asio::co_spawn(
        ex_,
        [this, alive, todo = std::move(todo)]() -> asio::awaitable<void> {
            for (const auto& [name, files] : todo) {
                auto r = co_await file_cache_.measure(files);
                if (!*alive) co_return;
                r.at = this->now();  // by the broker's clock, which its status reads the age by
                if (auto it = models_.find(name); it != models_.end()) it->second->files = r;
            }
            measuring_files_ = false;
        },
        asio::detached);
}

// Models not running whose files the kernel still holds: what a restart reads at memory speed. Reclaimable,
// so never booked; shown because on a unified-memory APU it is the memory the GPU allocates from.
nlohmann::json Broker::page_cache_view() const {
    std::uint64_t kept = 0;
    nlohmann::json models = nlohmann::json::object();
    for (const auto& [name, m] : models_)
        if (m->files && m->files->cached > 0 && m->state == ModelState::stopped) {
            kept += m->files->cached;
            models[name] = m->files->cached;
        }
    return {{"read_ahead", cfg_->read_ahead},
            {"stopped_models_bytes", kept},
            {"stopped_models", models},
            {"source", "measured"},
            {"detail",
             "model files of stopped models resident in the page cache (mincore): a restart reads them at "
             "memory speed; the kernel gives them back under pressure, so they are not booked"}};
}

}  // namespace loch::broker
