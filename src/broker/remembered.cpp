#include "broker/remembered.hpp"

#include <chrono>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

namespace loch::broker {

namespace {

namespace fs = std::filesystem;

std::string stat_of(const fs::path& p) {
    std::error_code ec;
    if (p.empty()) return "-";
    const auto size = fs::is_directory(p, ec) ? 0 : fs::file_size(p, ec);
    if (ec) return p.string() + "@?";
    const auto mtime = fs::last_write_time(p, ec);
    const auto ns =
        ec ? 0 : std::chrono::duration_cast<std::chrono::seconds>(mtime.time_since_epoch()).count();
    return fmt::format("{}@{}:{}", p.string(), size, ns);
}

}  // namespace

std::string key_text(const FootprintKey& k) {
    std::string argv;
    for (const auto& a : k.argv) argv += (argv.empty() ? "" : " ") + a;
    return fmt::format("model={} device={} kind={} file={} engine={} driver={} argv=[{}]", k.model, k.device,
                       k.kind, stat_of(k.model_file), stat_of(k.engine_file),
                       k.driver.empty() ? "-" : k.driver, argv);
}

RememberedFootprints::RememberedFootprints(fs::path file) : file_(std::move(file)) {
    if (file_.empty()) return;
    std::ifstream in(file_);
    if (!in) return;
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("footprints") || !j["footprints"].is_object()) {
        spdlog::warn("{}: not a footprints file; starting without remembered footprints", file_.string());
        return;
    }
    for (const auto& [key, v] : j["footprints"].items()) {
        if (!v.is_object() || !v.contains("bytes") || !v["bytes"].is_number_unsigned()) continue;
        const auto bytes = v["bytes"].get<std::uint64_t>();
        figures_[key] = {
            bytes, Source::measured_earlier,
            fmt::format("measured {} by an earlier loch ({})", human_bytes(bytes), v.value("detail", ""))};
        saved_[key] = bytes;
    }
}

std::optional<MemoryFigure> RememberedFootprints::get(const FootprintKey& k) const {
    const auto it = figures_.find(key_text(k));
    if (it == figures_.end()) return std::nullopt;
    return it->second;
}

void RememberedFootprints::raise(const FootprintKey& k, const MemoryFigure& f) {
    const auto key = key_text(k);
    auto& held = figures_[key];
    if (f.bytes <= held.bytes) return;
    held = {f.bytes, Source::measured_earlier, f.detail};
    if (held.bytes >= saved_[key] + kMiB) save();
}

void RememberedFootprints::save() {
    if (file_.empty()) return;
    nlohmann::json out = {
        {"about", "the highest memory loch measured per model, launch, engine build and driver"},
        {"footprints", nlohmann::json::object()}};
    for (const auto& [key, f] : figures_) out["footprints"][key] = {{"bytes", f.bytes}, {"detail", f.detail}};
    const auto tmp = file_.string() + ".tmp";
    {
        std::ofstream o(tmp, std::ios::trunc);
        o << out.dump(1) << "\n";
        if (!o) {
            spdlog::warn("cannot write {}: footprints are not remembered", tmp);
            return;
        }
    }
    std::error_code ec;
    fs::rename(tmp, file_, ec);
    if (ec) {
        spdlog::warn("cannot replace {}: {}", file_.string(), ec.message());
        return;
    }
    for (const auto& [key, f] : figures_) saved_[key] = f.bytes;
}

}  // namespace loch::broker
