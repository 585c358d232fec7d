// Checks about memory outside the GPU driver: mmap limits, other processes, containers, model sizes.
#include <fmt/format.h>

#include <map>

#include "doctor/checks.hpp"

namespace loch::doctor::checks {

using devices::Device;
using devices::DeviceKind;

namespace {

constexpr std::uint64_t kMinMapCount = 262144;
constexpr std::uint64_t kLargeModel = 35 * kGiB;          // a 70B model at 4 bits is ~40 GiB
constexpr std::uint64_t kReportProcessAbove = 64 * kMiB;  // desktop compositors hold a little VRAM
constexpr std::uint64_t kWarnProcessAbove = kGiB;

}  // namespace

void max_map_count(const DeviceReport& r, const Input& in, Findings& out) {
    const auto& m = r.system.max_map_count;
    if (!m || *m.value >= kMinMapCount) return;
    const auto* model = largest_model(in);
    Finding f;
    f.id = "max-map-count";
    f.severity = model && model->bytes.bytes < kLargeModel ? Severity::info : Severity::warning;
    f.evidence.push_back({"vm.max_map_count", std::to_string(*m.value), m.detail});
    if (model) f.evidence.push_back(figure_evidence("largest model " + model->name, model->bytes));
    f.explanation = fmt::format(
        "The kernel allows each process {} memory mappings. Memory-mapping a 70B+ model (and the many "
        "mappings "
        "GPU runtimes make) can exceed that: mmap fails with ENOMEM and the engine aborts while loading "
        "although RAM "
        "is free.{}",
        *m.value, model && model->bytes.bytes < kLargeModel ? " No configured model is that large yet." : "");
    f.fix =
        "sudo sysctl -w vm.max_map_count=1048576, and make it permanent with "
        "`echo vm.max_map_count=1048576 | sudo tee /etc/sysctl.d/99-loch.conf`.";
    out.push_back(std::move(f));
}

void outside_gpu_process(const DeviceReport& r, const Input& in, Findings& out) {
    for (const auto& d : r.devices) {
        if (d.kind == DeviceKind::cpu) continue;
        std::map<int, std::vector<const devices::ProcessUsage*>> by_pid;
        for (const auto& p : d.processes)
            if (!in.own_pids.count(p.pid)) by_pid[p.pid].push_back(&p);
        for (const auto& [pid, rows] : by_pid) {
            std::uint64_t total = 0;
            for (const auto* p : rows) total += p->bytes.bytes;
            if (total < kReportProcessAbove) continue;
            const auto& command = rows.front()->command;
            Finding f;
            f.id = "outside-gpu-process";
            f.severity = total >= kWarnProcessAbove ? Severity::warning : Severity::info;
            f.device = d.id;
            for (const auto* p : rows)
                f.evidence.push_back(
                    figure_evidence(fmt::format("PID {} {}", pid, devices::to_string(p->pool)), p->bytes));
            f.evidence.push_back({fmt::format("PID {} command", pid),
                                  command.empty() ? "unreadable" : command,
                                  fmt::format("/proc/{}/cmdline", pid)});
            f.explanation = fmt::format(
                "PID {} ({}) holds {} on {} and was not started by loch: that memory is not available to the "
                "models "
                "loch plans. A stale engine from an earlier run looks exactly like this.",
                pid, command.empty() ? "command unknown" : command, human_bytes(total), d.id);
            f.fix = fmt::format(
                "If PID {} is a leftover engine, stop it (kill {}); otherwise lower loch's budgets "
                "for {}.",
                pid, pid, d.id);
            out.push_back(std::move(f));
        }
    }
}

void container_memory_limit(const DeviceReport& r, const Input&, Findings& out) {
    const auto& s = r.system;
    if (!s.cgroup_max || !s.mem_total || s.cgroup_max->bytes >= s.mem_total->bytes) return;
    Finding f;
    f.id = "container-memory-limit";
    f.severity = Severity::warning;
    f.evidence.push_back(figure_evidence("cgroup memory limit", s.cgroup_max));
    f.evidence.push_back(figure_evidence("cgroup memory in use", s.cgroup_current));
    f.evidence.push_back(figure_evidence("MemTotal", s.mem_total));
    f.explanation = fmt::format(
        "loch runs in a memory cgroup limited to {} on a machine with {}. Every budget on the CPU and on "
        "unified-memory GPUs is capped at the cgroup headroom, and exceeding it kills the engine (OOM) "
        "instead of "
        "failing the request cleanly.",
        human_bytes(s.cgroup_max->bytes), human_bytes(s.mem_total->bytes));
    f.fix =
        "Raise the container's memory limit (docker/podman run --memory, Kubernetes resources.limits.memory, "
        "systemd MemoryMax=) to at least the largest model plus its context, or configure smaller models.";
    out.push_back(std::move(f));
}

void memory_limit_below_model(const DeviceReport& r, const Input& in, Findings& out) {
    const auto& s = r.system;
    const auto* model = largest_model(in);
    if (!s.cgroup_max || !model || s.cgroup_max->bytes >= model->bytes.bytes) return;
    // A discrete GPU that holds it keeps its weights out of host memory: the limit then bites only on
    // loading buffers, which the plan does not describe.
    for (const auto& d : r.devices)
        if (d.kind == DeviceKind::discrete && d.usable.budget && d.usable.budget->bytes >= model->bytes.bytes)
            return;
    Finding f;
    f.id = "memory-limit-below-model";
    f.severity = Severity::warning;
    f.evidence.push_back(figure_evidence("cgroup memory limit", s.cgroup_max));
    f.evidence.push_back(figure_evidence("model " + model->name, model->bytes));
    f.explanation = fmt::format(
        "loch's memory cgroup is limited to {}, less than {} needs ({}) on the CPU or a unified-memory GPU, "
        "where every byte is charged to the cgroup. loch refuses to load it (the limit is its capacity); "
        "without loch, the kernel would SIGKILL the engine partway through loading.",
        human_bytes(s.cgroup_max->bytes), model->name, human_bytes(model->bytes.bytes));
    f.fix = fmt::format(
        "Raise the limit above {} plus loch's own use (podman/docker --memory, Kubernetes "
        "resources.limits.memory, systemd MemoryMax=), remove it on unified-memory machines, or configure a "
        "smaller model or context.",
        human_bytes(model->bytes.bytes));
    out.push_back(std::move(f));
}

void model_does_not_fit(const DeviceReport& r, const Input& in, Findings& out) {
    for (const auto& m : in.models) {
        bool fits_gpu = false, fits_cpu = false, any_gpu = false;
        for (const auto& d : r.devices) {
            const bool fits = d.usable.budget && d.usable.budget->bytes >= m.bytes.bytes;
            if (d.kind == DeviceKind::cpu)
                fits_cpu = fits_cpu || fits;
            else {
                any_gpu = true;
                fits_gpu = fits_gpu || fits;
            }
        }
        if (fits_gpu || (fits_cpu && !any_gpu)) continue;
        Finding f;
        f.id = "model-does-not-fit";
        f.severity = fits_cpu ? Severity::warning : Severity::error;
        f.evidence.push_back(figure_evidence("model " + m.name, m.bytes));
        for (const auto& d : r.devices)
            f.evidence.push_back(figure_evidence("usable on " + d.id, d.usable.budget));
        f.explanation =
            fits_cpu ? fmt::format(
                           "{} needs {}, more than any GPU's usable budget: it can only run from CPU "
                           "RAM, many times slower.",
                           m.name, human_bytes(m.bytes.bytes))
                     : fmt::format(
                           "{} needs {}, more than the usable budget of every device (the budget is the "
                           "memory allocations can really get, not the nominal size): loading it fails.",
                           m.name, human_bytes(m.bytes.bytes));
        f.fix =
            "Use a smaller quantization or context, free the memory other processes hold, or raise the "
            "device's "
            "real budget (on an APU: the GTT size, see apu-gtt-ceiling; in a container: its memory limit).";
        out.push_back(std::move(f));
    }
}

void limit_never_fits(const DeviceReport&, const Input& in, Findings& out) {
    for (const auto& l : in.limits) {
        Finding f;
        f.id = "limit-never-fits";
        f.severity = Severity::warning;
        f.evidence.emplace_back("model " + l.model, "checked on " + l.devices, "the config (-c)");
        for (const auto& line : l.lines) f.evidence.emplace_back("limit", line, "the model's engine kind");
        f.explanation = fmt::format(
            "Model '{}' is configured for more than any device it may use can ever give: a request at that "
            "limit is refused every time (loch serve says the same at start).",
            l.model);
        f.fix =
            "Lower the limit to the largest value that fits (named above), give the model a device with "
            "more room (devices:, or a larger budget), or use the options named above.";
        out.push_back(std::move(f));
    }
}

void budget_unknown(const DeviceReport& r, const Input&, Findings& out) {
    for (const auto& d : r.devices) {
        if (d.usable.budget) continue;
        Finding f;
        f.id = "budget-unknown";
        f.severity = Severity::warning;
        f.device = d.id;
        f.evidence.push_back({"usable budget", "unknown", d.usable.budget.detail});
        f.explanation = fmt::format(
            "loch could not compute how much memory {} can use ({}), so it will not plan "
            "models onto it.",
            d.id, d.usable.budget.detail);
        f.fix =
            "Check that the files named above exist and are readable (amdgpu loaded, /proc and /sys "
            "mounted); "
            "run `loch devices` to see every figure and its source.";
        out.push_back(std::move(f));
    }
}

}  // namespace loch::doctor::checks
