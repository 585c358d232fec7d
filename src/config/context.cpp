// LoadContext::from_process — the only place the config module reads the process environment.
#include <unistd.h>

#include <cstdlib>

#include "config/config.hpp"

namespace loch::config {

LoadContext LoadContext::from_process() {
    LoadContext c;
    std::error_code ec;
    c.cwd = fs::current_path(ec);
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) c.exe_dir = exe.parent_path();
    if (const char* path = std::getenv("PATH")) {
        std::string_view rest(path);
        while (true) {
            const auto colon = rest.find(':');
            const std::string_view dir = rest.substr(0, colon);
            if (!dir.empty()) c.path_dirs.emplace_back(std::string(dir));
            if (colon == std::string_view::npos) break;
            rest.remove_prefix(colon + 1);
        }
    }
    const char* home = std::getenv("HOME");
    if (home != nullptr && *home != '\0') c.home = home;
    const char* xdg = std::getenv("XDG_STATE_HOME");
    if (xdg != nullptr && *xdg == '/')
        c.default_state_dir = fs::path(xdg) / "loch";
    else if (!c.home.empty())
        c.default_state_dir = c.home / ".local" / "state" / "loch";
    else
        c.default_state_dir = c.cwd / ".loch";
    return c;
}

}  // namespace loch::config
