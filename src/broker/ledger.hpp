// broker/ledger — who holds how much memory on each device, as loch sees it.
//
// Per device: the budget loch may use (configured cap and/or the probe's total minus the driver's own
// reservation and a configured reserve), memory used by everything outside loch (probe's used − loch's
// loaded engines), and one reservation per engine. A reservation starts as the reservation rule's figure
// (broker/footprint.hpp) and only ever grows while the engine runs: to the engine log's figure and to the
// per-process peaks the probes observe. Free memory therefore never goes up before the probe shows it.
// Pure bookkeeping: no I/O, owned by the broker.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/memory.hpp"

namespace loch::broker {

struct DeviceLimits {
    std::string id;                   // "cpu", "cuda0", ...
    MemoryFigure total;               // physical size per the probe (or configured)
    MemoryFigure reserve;             // kept free for the system (configured)
    std::optional<MemoryFigure> cap;  // configured budget for loch on this device
    MemoryFigure driver_reserved;     // never free: the driver's own (NVML v2 `reserved`); 0 if unknown
    // The engine build's own ceiling on this device (a Vulkan build on an APU: its DEVICE_LOCAL heap, far
    // below the GTT pool the ROCm build can use).
    std::optional<MemoryFigure> backend_bound;
    // The engine build's largest single allocation there (Vulkan: maxMemoryAllocationSize): a request with a
    // larger tensor can never run on this device, however much is free.
    std::optional<MemoryFigure> largest_allocation;
    // What would give this device more room, from the platform (an APU whose carve-out is larger than the
    // GTT ceiling its ROCm engines allocate from: the BIOS setting and kernel parameters), for refusals.
    std::string advice;
};

// A program loch did not start that holds memory on a device (NVML per process, DRM fdinfo; on the CPU the
// largest resident processes), named for refusals and status.
struct OtherProcess {
    int pid = 0;
    std::string user, command;
    std::uint64_t bytes = 0;
};

struct Reservation {
    std::string engine;
    MemoryFigure figure;  // planner estimate until measured; then the engine log's numbers
    bool loading = true;  // the engine is still starting: its memory may not be allocated yet
};

class Ledger {
  public:
    void set_device(DeviceLimits limits);
    // The probe's whole-device "used" (includes loch's engines). Outside use = used − loch's measured own.
    void observe_used(const std::string& device, std::uint64_t used_bytes);

    void reserve(const std::string& device, const std::string& engine, MemoryFigure planned);
    // Raises the engine's reservation to `measured` when that is larger (a log figure, a per-process peak);
    // never lowers it. Returns whether it grew.
    bool raise_to_measured(const std::string& device, const std::string& engine, MemoryFigure measured);
    void mark_loaded(const std::string& device, const std::string& engine);
    void release(const std::string& engine);  // on every device

    bool has_device(const std::string& device) const;
    std::vector<std::string> devices() const;
    const DeviceLimits* limits(const std::string& device) const;

    // The device with nothing on it but the driver: min(cap, total − driver_reserved − reserve).
    std::uint64_t empty_capacity(const std::string& device) const;
    // What can ever be free for loch with the other programs' use as it is now:
    // min(cap, total − driver_reserved − reserve − outside). A model larger than this is refused at once.
    std::uint64_t capacity(const std::string& device) const;
    // The same without the engine build's ceiling (what another build could use: GTT for ROCm on an APU).
    std::uint64_t capacity_without_backend_bound(const std::string& device) const;
    // Where `capacity` comes from, for a refusal: "total 64.0 GiB: the memory cgroup's limit (…)", the
    // configured budget or the engine build's bound when one of them is what binds.
    std::string capacity_detail(const std::string& device) const;
    std::uint64_t own(const std::string& device) const;      // Σ reservations
    std::uint64_t outside(const std::string& device) const;  // others' use, from the last probe
    // What a new engine may take now: min(cap, total − reserve − outside) − own, floored at 0.
    std::uint64_t free(const std::string& device) const;
    std::optional<MemoryFigure> reservation(const std::string& device, const std::string& engine) const;
    const std::vector<Reservation>* reservations(const std::string& device) const;

    // The named programs behind `outside` (largest first), as the broker last saw them.
    void set_other_processes(const std::string& device, std::vector<OtherProcess> processes);
    const std::vector<OtherProcess>& other_processes(const std::string& device) const;
    // "11.2 GiB: `python train.py` (pid 4123, alice) 11.2 GiB, …" — the outside use and the largest three
    // programs named; just the figure when none is known.
    std::string outside_text(const std::string& device) const;

    nlohmann::json to_json() const;

  private:
    std::uint64_t capacity_bounded(const std::string& device, bool by_backend) const;
    struct Device {
        DeviceLimits limits;
        std::uint64_t probe_used = 0;
        bool probed = false;
        std::vector<Reservation> reservations;
        std::vector<OtherProcess> others;
    };
    std::uint64_t measured_own(const Device& d) const;
    std::map<std::string, Device> devices_;
};

}  // namespace loch::broker
