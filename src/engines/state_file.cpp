// engines.json: atomic rewrite, flock ownership, verified cleanup of a crashed loch's engines.
#include "engines/state_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "engines/process.hpp"

namespace loch::engines {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json to_json_record(const EngineRecord& r) {
    return json{{"model", r.model}, {"pid", r.pid},   {"pgid", r.pgid}, {"start_ticks", r.start_ticks},
                {"argv", r.argv},   {"port", r.port}, {"tag", r.tag},   {"started_unix", r.started_unix}};
}

EngineRecord from_json_record(const json& j) {
    EngineRecord r;
    r.model = j.at("model").get<std::string>();
    r.pid = j.at("pid").get<pid_t>();
    r.pgid = j.at("pgid").get<pid_t>();
    r.start_ticks = j.at("start_ticks").get<std::uint64_t>();
    r.argv = j.at("argv").get<std::vector<std::string>>();
    r.port = j.value("port", std::uint16_t{0});
    r.tag = j.value("tag", std::string{});
    r.started_unix = j.value("started_unix", std::int64_t{0});
    return r;
}

// Gone: no such PID, a different process under it, or a zombie (dead, waiting for its parent to reap it).
bool gone(const EngineRecord& r) {
    const auto t = proc_start_ticks(r.pid);
    if (!t || *t != r.start_ticks) return true;
    const auto state = proc_state(r.pid);
    return !state || *state == 'Z';
}

// Same process as recorded: same start time (the strong check) and same argv.
std::optional<std::string> identity_mismatch(const EngineRecord& r) {
    if (r.pid <= 1 || r.pgid <= 1) return "invalid pid/pgid in the record";
    const auto ticks = proc_start_ticks(r.pid);
    if (!ticks) return "no longer running";
    if (*ticks != r.start_ticks)
        return "start time differs (" + std::to_string(*ticks) + " vs recorded " +
               std::to_string(r.start_ticks) + "): the PID now belongs to a different process";
    const auto cmd = proc_cmdline(r.pid);
    if (!cmd || *cmd != r.argv)
        return "command line differs from the recorded one: not the engine loch started";
    if (::getpgid(r.pid) != r.pgid) return "process group differs from the recorded one";
    return std::nullopt;
}

}  // namespace

StateSnapshot read_state(const fs::path& file) {
    StateSnapshot s;
    std::ifstream in(file);
    if (!in) {
        std::error_code ec;
        if (!fs::exists(file, ec)) return s;
        throw std::runtime_error("cannot read state file " + file.string());
    }
    try {
        const json j = json::parse(in);
        s.owner_pid = j.value("owner_pid", pid_t{0});
        s.owner_start_ticks = j.value("owner_start_ticks", std::uint64_t{0});
        for (const auto& e : j.at("engines")) s.engines.push_back(from_json_record(e));
    } catch (const json::exception& e) {
        throw std::runtime_error("corrupt state file " + file.string() + ": " + e.what());
    }
    return s;
}

void write_state(const fs::path& file, const StateSnapshot& s) {
    json j{
        {"owner_pid", s.owner_pid}, {"owner_start_ticks", s.owner_start_ticks}, {"engines", json::array()}};
    for (const auto& r : s.engines) j["engines"].push_back(to_json_record(r));
    const fs::path tmp = file.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << j.dump(2) << '\n';
        out.flush();
        if (!out) throw std::runtime_error("cannot write state file " + tmp.string());
    }
    fs::rename(tmp, file);  // atomic: a crash leaves either the old or the new file
}

CleanupResult kill_recorded_engines(const std::vector<EngineRecord>& records) {
    CleanupResult res;
    std::vector<EngineRecord> signalled;
    for (const auto& r : records) {
        if (auto why = identity_mismatch(r)) {
            res.skipped.push_back("pid " + std::to_string(r.pid) + " (model " + r.model + "): " + *why);
            continue;
        }
        ::kill(-r.pgid, SIGTERM);
        signalled.push_back(r);
    }
    // Give them 2 s to go, then SIGKILL what is left (re-verified: identity first, always).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (const auto& r : signalled) {
        while (!gone(r) && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (!identity_mismatch(r)) ::kill(-r.pgid, SIGKILL);
        const auto hard = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (!gone(r) && std::chrono::steady_clock::now() < hard)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        res.killed.push_back(r);
    }
    // What the engines forked: survivors of a SIGKILL of loch (the leader died of PDEATHSIG, its children
    // did not) carry the engine's tag, whatever group or session they are in now.
    for (const auto& r : records) {
        const auto pids = kill_tagged(r.tag);
        if (pids.empty()) continue;
        std::string list;
        for (auto p : pids) list += (list.empty() ? "" : ", ") + std::to_string(p);
        res.descendants_killed.push_back("model " + r.model + ": pid " + list);
    }
    return res;
}

StateFile::StateFile(fs::path state_dir) : dir_(std::move(state_dir)) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) throw std::runtime_error("cannot create state dir " + dir_.string() + ": " + ec.message());
    const fs::path lock = dir_ / "loch.lock";
    lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0) throw std::runtime_error("cannot open " + lock.string() + ": " + std::strerror(errno));
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
        std::string holder;
        try {
            const auto s = read_state(file());
            if (s.owner_pid > 0) holder = " by loch pid " + std::to_string(s.owner_pid);
        } catch (const std::exception&) {
        }
        ::close(lock_fd_);
        lock_fd_ = -1;
        throw std::runtime_error("state dir " + dir_.string() + " is in use" + holder +
                                 ": another loch is running with it (give each loch its own state_dir)");
    }
    current_.owner_pid = ::getpid();
    current_.owner_start_ticks = proc_start_ticks(::getpid()).value_or(0);
}

StateFile::~StateFile() {
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

fs::path StateFile::file() const {
    return dir_ / "engines.json";
}

CleanupResult StateFile::cleanup_stale() {
    CleanupResult res;
    StateSnapshot old;
    try {
        old = read_state(file());
    } catch (const std::exception& e) {
        res.skipped.push_back(std::string(e.what()) + " (ignored; it is replaced)");
    }
    // We hold the lock, so the previous owner is not running (or is us, re-opening): its engines are stale.
    // Records we wrote ourselves in this process stay untouched.
    std::vector<EngineRecord> stale;
    for (const auto& r : old.engines) {
        const bool ours = std::any_of(current_.engines.begin(), current_.engines.end(),
                                      [&](const auto& c) { return c.pid == r.pid; });
        if (!ours) stale.push_back(r);
    }
    auto k = kill_recorded_engines(stale);
    res.killed = std::move(k.killed);
    res.skipped.insert(res.skipped.end(), k.skipped.begin(), k.skipped.end());
    res.descendants_killed = std::move(k.descendants_killed);
    save();
    return res;
}

void StateFile::add(const EngineRecord& r) {
    current_.engines.push_back(r);
    save();
}

void StateFile::remove(pid_t pid) {
    std::erase_if(current_.engines, [&](const auto& r) { return r.pid == pid; });
    save();
}

void StateFile::save() {
    write_state(file(), current_);
}

CleanupResult cleanup_stale(const fs::path& state_dir) {
    StateFile s(state_dir);
    return s.cleanup_stale();
}

}  // namespace loch::engines
