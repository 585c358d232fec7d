// broker/saved_slots — the store of saved slots (saved_slots.hpp says what and why).
#include "broker/saved_slots.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/file_identity.hpp"
#include "core/off_loop.hpp"

namespace loch::broker {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMinMatchBytes = 256;

// FNV-1a, 64 bits: a folder name for a key (the full key is kept in the folder and compared).
std::string hex_hash(std::string_view text) {
    std::uint64_t h = 14695981039346656037ull;
    for (const unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    return fmt::format("{:016x}", h);
}

std::string joined(const std::vector<std::string>& argv) {
    std::string text;
    for (const auto& a : argv) text += a + '\x1f';
    return text;
}

// <folder>/launch.txt: which launch the folder's files belong to.
constexpr int kLaunchFormat = 2;
nlohmann::json read_launch(const fs::path& dir) {
    std::ifstream in(dir / "launch.txt", std::ios::binary);
    if (!in) return nullptr;
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object() || j.value("format", 0) != kLaunchFormat || !j.contains("argv") ||
        !j["argv"].is_string() || !j.contains("identity") || !j["identity"].is_string())
        return nlohmann::json::object();  // there, but not ours to read: an older loch or damage
    return j;
}

struct Prepared {
    bool ok = false;
    bool emptied = false;
};

Prepared prepare_folder(const fs::path& dir, const std::vector<std::string>& argv) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        spdlog::warn("slot files: cannot create {}: {} (conversations are not saved)", dir.string(),
                     ec.message());
        return {};
    }
    const nlohmann::json want = {
        {"format", kLaunchFormat}, {"argv", joined(argv)}, {"identity", launch_identity(argv)}};
    const auto had = read_launch(dir);
    Prepared r{true, false};
    if (!had.is_null()) {
        if (had.value("argv", std::string()) != want["argv"].get<std::string>())
            return {};  // a hash collision: never mix
        if (had["identity"] == want["identity"]) return r;
        // The same settings over another model file or engine build: what it saved cannot be restored.
        for (const auto& f : fs::directory_iterator(dir, ec))
            if (f.path().filename() != "launch.txt") fs::remove(f.path(), ec);
        r.emptied = true;
    }
    std::ofstream(dir / "launch.txt", std::ios::binary) << want.dump();
    return r;
}

std::size_t common_prefix(std::string_view a, std::string_view b) {
    const auto [ia, ib] = std::ranges::mismatch(a, b);
    return static_cast<std::size_t>(ia - a.begin());
}

std::optional<SavedEntry> read_sidecar(const fs::path& json_file, const std::string& key) {
    std::ifstream in(json_file);
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("file") || !j["file"].is_string() || !j.contains("prompt") ||
        !j["prompt"].is_string())
        return std::nullopt;
    SavedEntry e;
    e.key = key;
    e.file = j["file"].get<std::string>();
    e.prompt = j["prompt"].get<std::string>();
    e.tokens = j.value("tokens", std::uint64_t{0});
    e.bytes = j.value("bytes", std::uint64_t{0});
    e.saved_at_ms = j.value("saved_at_ms", std::int64_t{0});
    std::error_code ec;
    if (e.file.empty() || e.file.find('/') != std::string::npos) return std::nullopt;
    const auto real = fs::file_size(json_file.parent_path() / e.file, ec);
    if (ec) return std::nullopt;
    e.bytes = real;
    return e;
}

void remove_entry(const fs::path& root, const SavedEntry& e) {
    std::error_code ec;
    fs::remove(root / e.key / e.file, ec);
    fs::remove(root / e.key / (e.file + ".json"), ec);
}

}  // namespace

std::string slot_folder(const std::vector<std::string>& argv) {
    return hex_hash(joined(argv));
}

std::string launch_identity(const std::vector<std::string>& argv) {
    // Every file the launch names (the engine binary, the model) by its identity: a rebuilt engine or a
    // replaced model file is another launch.
    std::string out;
    for (const auto& a : argv)
        if (!a.empty() && a.front() == '/')
            if (auto id = file_identity(a); !id.empty()) out += id + '\n';
    return out;
}

std::optional<SavedEntry> best_match(const std::vector<SavedEntry>& entries, std::string_view prompt,
                                     const std::set<std::string>& skip) {
    std::optional<SavedEntry> best;
    std::size_t best_len = 0;
    for (const auto& e : entries) {
        if (skip.contains(e.file)) continue;
        const std::size_t n = common_prefix(e.prompt, prompt);
        if (n < kMinMatchBytes || 2 * n < e.prompt.size() || n <= best_len) continue;
        best = e;
        best_len = n;
    }
    return best;
}

std::vector<SavedEntry> over_limit(const std::vector<SavedEntry>& entries, std::uint64_t max_bytes) {
    std::vector<const SavedEntry*> by_age;
    for (const auto& e : entries) by_age.push_back(&e);
    std::ranges::stable_sort(by_age, {}, &SavedEntry::saved_at_ms);  // oldest first
    std::vector<SavedEntry> drop;
    std::set<const SavedEntry*> dropped;
    // A conversation saved again later (its newer text extends this one's) needs only its newer file.
    for (std::size_t i = 0; i < by_age.size(); ++i)
        for (std::size_t j = i + 1; j < by_age.size(); ++j)
            if (by_age[i]->key == by_age[j]->key && by_age[j]->prompt.starts_with(by_age[i]->prompt)) {
                dropped.insert(by_age[i]);
                break;
            }
    std::uint64_t total = 0;
    for (const auto* e : by_age)
        if (!dropped.contains(e)) total += e->bytes;
    for (const auto* e : by_age) {
        if (total <= max_bytes) break;
        if (dropped.insert(e).second) total -= e->bytes;
    }
    for (const auto* e : by_age)
        if (dropped.contains(e)) drop.push_back(*e);
    return drop;
}

SavedSlots::SavedSlots(fs::path root, config::SlotSaveConfig cfg) : root_(std::move(root)), cfg_(cfg) {
    // Start-up, before the loop serves: what earlier runs saved.
    std::error_code ec;
    for (const auto& dir : fs::directory_iterator(root_, ec)) {
        if (!dir.is_directory(ec)) continue;
        const std::string key = dir.path().filename().string();
        if (!read_launch(dir.path()).contains("identity")) {
            fs::remove_all(dir.path(), ec);  // an older loch's folder, or one without its launch
            continue;
        }
        std::vector<fs::path> files;
        for (const auto& f : fs::directory_iterator(dir.path(), ec)) files.push_back(f.path());
        for (const auto& f : files) {
            if (f.extension() == ".json") {
                if (auto e = read_sidecar(f, key))
                    remember({std::move(*e)});
                else
                    fs::remove(f, ec);
            } else if (f.extension() == ".bin" && !fs::exists(f.string() + ".json", ec)) {
                fs::remove(f, ec);  // written by an engine while loch stopped before it recorded it
            }
        }
    }
}

SavedSlots::~SavedSlots() {
    work_.join();
}

void SavedSlots::remember(std::vector<SavedEntry> fresh) {
    for (auto& e : fresh) {
        // The same file name written again (the same slot of a later save) replaces its entry.
        forget({e});
        ++files_of_[e.key];
        entries_.push_back(std::move(e));
    }
}

void SavedSlots::forget(const std::vector<SavedEntry>& gone) {
    for (const auto& g : gone) {
        const auto n =
            std::erase_if(entries_, [&](const SavedEntry& e) { return e.key == g.key && e.file == g.file; });
        if (n == 0) continue;
        if (auto it = files_of_.find(g.key); it != files_of_.end() && (it->second -= n) == 0)
            files_of_.erase(it);
    }
}

bool SavedSlots::saving() const {
    return cfg_.enabled && cfg_.max_disk > 0 && !root_.empty();
}

std::optional<fs::path> SavedSlots::folder(const std::vector<std::string>& argv) const {
    if (!saving()) return std::nullopt;
    return root_ / slot_folder(argv);
}

boost::asio::awaitable<bool> SavedSlots::prepare(std::vector<std::string> argv) {
    const auto dir = folder(argv);
    if (!dir) co_return false;
    const auto r = co_await core::off_loop(
        work_, [dir = *dir, argv = std::move(argv)]() { return prepare_folder(dir, argv); });
    if (r.emptied) {
        const std::string key = dir->filename().string();
        std::vector<SavedEntry> stale;
        for (const auto& e : entries_)
            if (e.key == key) stale.push_back(e);
        forget(stale);
    }
    co_return r.ok;
}

boost::asio::awaitable<bool> SavedSlots::may_save(std::string key) {
    if (!saving()) co_return false;
    co_return co_await core::off_loop(work_, [dir = root_ / key]() {
        struct statvfs st {};
        if (::statvfs(dir.c_str(), &st) != 0) return false;
        const double total = double(st.f_blocks) * double(st.f_frsize);
        const double avail = double(st.f_bavail) * double(st.f_frsize);
        return avail >= 0.10 * total && avail >= double(std::uint64_t{1} << 30);
    });
}

bool SavedSlots::may_match(const std::string& key, std::string_view probe,
                           const std::set<std::string>& skip) const {
    if (probe.empty()) return false;
    return std::ranges::any_of(entries_, [&](const SavedEntry& e) {
        return e.key == key && !skip.contains(e.file) && e.prompt.find(probe) != std::string::npos;
    });
}

std::optional<SavedEntry> SavedSlots::match(const std::string& key, std::string_view prompt,
                                            const std::set<std::string>& skip) const {
    std::vector<SavedEntry> mine;
    for (const auto& e : entries_)
        if (e.key == key) mine.push_back(e);
    return best_match(mine, prompt, skip);
}

boost::asio::awaitable<std::vector<SavedEntry>> SavedSlots::add(std::string key,
                                                                std::vector<engines::SavedSlot> saved) {
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    std::vector<SavedEntry> fresh;
    for (auto& s : saved)
        fresh.push_back({key, std::move(s.file), std::move(s.prompt), s.tokens, s.bytes, now_ms});
    const fs::path dir = root_ / key;
    fresh = co_await core::off_loop(work_, [dir, fresh]() {
        std::vector<SavedEntry> written;
        for (const auto& e : fresh) {
            const nlohmann::json side = {{"file", e.file},
                                         {"prompt", e.prompt},
                                         {"tokens", e.tokens},
                                         {"bytes", e.bytes},
                                         {"saved_at_ms", e.saved_at_ms}};
            std::ofstream out(dir / (e.file + ".json"), std::ios::binary);
            out << side.dump();
            if (out) written.push_back(e);
        }
        return written;
    });
    remember(std::move(fresh));
    auto drop = over_limit(entries_, cfg_.max_disk);
    forget(drop);
    if (!drop.empty())
        co_await core::off_loop(work_, [root = root_, drop]() {
            for (const auto& d : drop) remove_entry(root, d);
            return 0;
        });
    co_return drop;
}

nlohmann::json SavedSlots::status() const {
    std::uint64_t bytes = 0;
    for (const auto& e : entries_) bytes += e.bytes;
    return {{"enabled", cfg_.enabled},   {"files", entries_.size()},      {"bytes", bytes},
            {"max_disk", cfg_.max_disk}, {"min_tokens", cfg_.min_tokens}, {"folder", root_.string()}};
}

}  // namespace loch::broker
