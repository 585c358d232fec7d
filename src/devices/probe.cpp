#include "devices/probe.hpp"

#include "devices/usable.hpp"

extern char** environ;  // POSIX: the process environment

namespace loch::devices {

Env process_environment() {
    Env env;
    for (char** e = environ; e && *e; ++e) {
        const std::string_view entry(*e);
        const auto eq = entry.find('=');
        if (eq != std::string_view::npos && eq > 0)
            env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    }
    return env;
}

ProbeOptions default_probe_options(const std::filesystem::path& sysroot, const Env& process_env) {
    ProbeOptions o;
    o.sysroot = sysroot;
    const bool live = Sysroot(sysroot).is_live();
    if (auto it = process_env.find("LOCH_NVML_LIBRARY"); it != process_env.end() && !it->second.empty())
        o.nvml_library = it->second;
    else if (live)
        o.nvml_library = "libnvidia-ml.so.1";
    o.probe_vulkan = live;
    if (live) o.env = process_env;
    return o;
}

DeviceReport probe(const ProbeOptions& options) {
    const Sysroot root(options.sysroot);
    DeviceReport r;
    r.system = probe_system(root, options.env);
    if (!options.nvml_library.empty()) {
        auto nv = probe_nvidia(options.nvml_library, root);
        if (!nv.note.empty()) r.notes.push_back(nv.note);
        for (auto& d : nv.devices) r.devices.push_back(std::move(d));
    } else {
        r.notes.push_back("NVML not probed: captured tree (--sysroot) and no LOCH_NVML_LIBRARY");
    }
    for (auto& d : probe_amd(root)) r.devices.push_back(std::move(d));
    if (options.probe_vulkan) {
        if (auto note = probe_vulkan(r.devices, options.software_vulkan); !note.empty())
            r.notes.push_back(note);
    } else if (auto note = probe_vulkan_capture(root, r.devices, options.software_vulkan); !note.empty()) {
        r.notes.push_back(note);
    }
    r.devices.push_back(probe_cpu(r.system));
    for (auto& d : r.devices) d.usable = usable_budget(d, r.system);
    return r;
}

}  // namespace loch::devices
