#include "broker/ledger.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace loch::broker {

namespace {
std::uint64_t sub_floor(std::uint64_t a, std::uint64_t b) {
    return a > b ? a - b : 0;
}
}  // namespace

void Ledger::set_device(DeviceLimits limits) {
    auto& d = devices_[limits.id];
    d.limits = std::move(limits);
}

void Ledger::observe_used(const std::string& device, std::uint64_t used_bytes) {
    auto it = devices_.find(device);
    if (it == devices_.end()) return;
    it->second.probe_used = used_bytes;
    it->second.probed = true;
}

void Ledger::reserve(const std::string& device, const std::string& engine, MemoryFigure planned) {
    auto it = devices_.find(device);
    if (it == devices_.end()) throw std::invalid_argument("ledger: unknown device '" + device + "'");
    auto& rs = it->second.reservations;
    auto r = std::find_if(rs.begin(), rs.end(), [&](const Reservation& x) { return x.engine == engine; });
    if (r != rs.end()) {
        r->figure = std::move(planned);
        r->loading = true;
    } else {
        rs.push_back({engine, std::move(planned), true});
    }
}

bool Ledger::raise_to_measured(const std::string& device, const std::string& engine, MemoryFigure measured) {
    auto it = devices_.find(device);
    if (it == devices_.end()) return false;
    for (auto& r : it->second.reservations)
        if (r.engine == engine && measured.bytes > r.figure.bytes) {
            r.figure = std::move(measured);
            return true;
        }
    return false;
}

void Ledger::mark_loaded(const std::string& device, const std::string& engine) {
    auto it = devices_.find(device);
    if (it == devices_.end()) return;
    for (auto& r : it->second.reservations)
        if (r.engine == engine) r.loading = false;
}

void Ledger::release(const std::string& engine) {
    for (auto& [id, d] : devices_)
        std::erase_if(d.reservations, [&](const Reservation& r) { return r.engine == engine; });
}

bool Ledger::has_device(const std::string& device) const {
    return devices_.contains(device);
}

std::vector<std::string> Ledger::devices() const {
    std::vector<std::string> out;
    for (const auto& [id, d] : devices_) out.push_back(id);
    return out;
}

const DeviceLimits* Ledger::limits(const std::string& device) const {
    auto it = devices_.find(device);
    return it == devices_.end() ? nullptr : &it->second.limits;
}

std::uint64_t Ledger::empty_capacity(const std::string& device) const {
    auto it = devices_.find(device);
    if (it == devices_.end()) return 0;
    const auto& l = it->second.limits;
    std::uint64_t c = sub_floor(sub_floor(l.total.bytes, l.driver_reserved.bytes), l.reserve.bytes);
    if (l.cap) c = std::min(c, l.cap->bytes);
    if (l.backend_bound) c = std::min(c, l.backend_bound->bytes);
    return c;
}

std::uint64_t Ledger::capacity(const std::string& device) const {
    return capacity_bounded(device, true);
}

std::uint64_t Ledger::capacity_without_backend_bound(const std::string& device) const {
    return capacity_bounded(device, false);
}

std::string Ledger::capacity_detail(const std::string& device) const {
    const auto* l = limits(device);
    if (!l) return "unknown device";
    std::string out = fmt::format("total {}: {}", human_bytes(l->total.bytes), l->total.detail);
    if (l->cap && l->cap->bytes < l->total.bytes)
        out += fmt::format("; capped at {} by {}", human_bytes(l->cap->bytes), l->cap->detail);
    if (l->backend_bound && l->backend_bound->bytes < l->total.bytes)
        out += fmt::format("; bounded at {} by {}", human_bytes(l->backend_bound->bytes),
                           l->backend_bound->detail);
    return out;
}

std::uint64_t Ledger::capacity_bounded(const std::string& device, bool by_backend) const {
    auto it = devices_.find(device);
    if (it == devices_.end()) return 0;
    const auto& l = it->second.limits;
    // Others' use here counts every reservation of loch's as loch's, loading ones too: a load in flight
    // must not make another model look as if it could never fit.
    const std::uint64_t others =
        it->second.probed ? sub_floor(it->second.probe_used, own(device)) : std::uint64_t{0};
    const std::uint64_t physical =
        sub_floor(sub_floor(sub_floor(l.total.bytes, l.driver_reserved.bytes), l.reserve.bytes), others);
    std::uint64_t c = l.cap ? std::min(physical, l.cap->bytes) : physical;
    if (by_backend && l.backend_bound) c = std::min(c, l.backend_bound->bytes);
    return c;
}

std::uint64_t Ledger::own(const std::string& device) const {
    auto it = devices_.find(device);
    if (it == devices_.end()) return 0;
    std::uint64_t sum = 0;
    for (const auto& r : it->second.reservations) sum += r.figure.bytes;
    return sum;
}

std::uint64_t Ledger::measured_own(const Device& d) const {
    // Only engines that finished loading are in the probe's "used"; a loading engine's allocation is partly
    // there, which makes `outside` err on the high (safe) side until it is loaded.
    std::uint64_t sum = 0;
    for (const auto& r : d.reservations)
        if (!r.loading) sum += r.figure.bytes;
    return sum;
}

std::uint64_t Ledger::outside(const std::string& device) const {
    auto it = devices_.find(device);
    if (it == devices_.end() || !it->second.probed) return 0;
    return sub_floor(it->second.probe_used, measured_own(it->second));
}

std::uint64_t Ledger::free(const std::string& device) const {
    auto it = devices_.find(device);
    if (it == devices_.end()) return 0;
    const auto& l = it->second.limits;
    // Two limits bind at once: the physical device shared with everything else, and loch's own cap.
    std::uint64_t physical = sub_floor(
        sub_floor(sub_floor(l.total.bytes, l.driver_reserved.bytes), l.reserve.bytes), outside(device));
    std::uint64_t limit = l.cap ? std::min(physical, l.cap->bytes) : physical;
    if (l.backend_bound) limit = std::min(limit, l.backend_bound->bytes);
    return sub_floor(limit, own(device));
}

std::optional<MemoryFigure> Ledger::reservation(const std::string& device, const std::string& engine) const {
    auto it = devices_.find(device);
    if (it == devices_.end()) return std::nullopt;
    for (const auto& r : it->second.reservations)
        if (r.engine == engine) return r.figure;
    return std::nullopt;
}

const std::vector<Reservation>* Ledger::reservations(const std::string& device) const {
    auto it = devices_.find(device);
    return it == devices_.end() ? nullptr : &it->second.reservations;
}

void Ledger::set_other_processes(const std::string& device, std::vector<OtherProcess> processes) {
    if (auto it = devices_.find(device); it != devices_.end()) it->second.others = std::move(processes);
}

const std::vector<OtherProcess>& Ledger::other_processes(const std::string& device) const {
    static const std::vector<OtherProcess> none;
    auto it = devices_.find(device);
    return it == devices_.end() ? none : it->second.others;
}

std::string Ledger::outside_text(const std::string& device) const {
    std::string out = human_bytes(outside(device));
    const auto& others = other_processes(device);
    for (std::size_t i = 0; i < others.size() && i < 3; ++i)
        out += fmt::format("{}`{}` (pid {}, {}) {}", i == 0 ? ": " : ", ", others[i].command, others[i].pid,
                           others[i].user, human_bytes(others[i].bytes));
    return out;
}

nlohmann::json Ledger::to_json() const {
    auto out = nlohmann::json::array();
    for (const auto& [id, d] : devices_) {
        nlohmann::json j;
        j["device"] = id;
        j["total"] = d.limits.total;
        j["reserve"] = d.limits.reserve;
        if (d.limits.cap) j["cap"] = *d.limits.cap;
        j["driver_reserved"] = d.limits.driver_reserved;
        j["empty_capacity_bytes"] = empty_capacity(id);
        j["capacity_bytes"] = capacity(id);
        if (d.limits.backend_bound) {
            j["backend_bound_bytes"] = d.limits.backend_bound->bytes;
            j["backend_bound"] = d.limits.backend_bound->detail;
        }
        if (d.limits.largest_allocation) j["largest_allocation"] = *d.limits.largest_allocation;
        if (!d.limits.advice.empty()) j["advice"] = d.limits.advice;
        j["outside_bytes"] = outside(id);
        j["own_bytes"] = own(id);
        j["free_bytes"] = free(id);
        auto rs = nlohmann::json::array();
        for (const auto& r : d.reservations)
            rs.push_back({{"engine", r.engine}, {"figure", r.figure}, {"loading", r.loading}});
        j["reservations"] = std::move(rs);
        auto others = nlohmann::json::array();
        for (const auto& p : d.others)
            others.push_back({{"pid", p.pid}, {"user", p.user}, {"command", p.command}, {"bytes", p.bytes}});
        j["other_processes"] = std::move(others);
        out.push_back(std::move(j));
    }
    return out;
}

}  // namespace loch::broker
