#include "doctor/doctor.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "doctor/checks.hpp"

namespace loch::doctor {

namespace {

using CheckFn = void (*)(const devices::DeviceReport&, const Input&, std::vector<Finding>&);

struct Check {
    CheckInfo info;
    CheckFn run;
};

const std::vector<Check>& registry() {
    static const std::vector<Check> all = {
        {{"apu-gtt-ceiling", "APU whose GTT pool is smaller than its BIOS carve-out"},
         checks::apu_gtt_ceiling},
        {{"unified-memory-env", "GGML_CUDA_ENABLE_UNIFIED_MEMORY set (SIGSEGV on APUs, cgroup charging)"},
         checks::unified_memory_env},
        {{"linux-firmware-broken", "linux-firmware 20251125 with a Strix Halo GPU"},
         checks::linux_firmware_broken},
        {{"hsa-override-gfx", "GPU target without official ROCm wheels and no HSA_OVERRIDE_GFX_VERSION"},
         checks::hsa_override_gfx},
        {{"vulkan-heap-too-small", "Vulkan engine on an APU whose device-local heap is too small"},
         checks::vulkan_heap_too_small},
        {{"max-map-count", "vm.max_map_count too low for 70B+ models"}, checks::max_map_count},
        {{"outside-gpu-process", "processes loch did not start holding GPU memory"},
         checks::outside_gpu_process},
        {{"container-memory-limit", "cgroup memory limit below the machine's RAM"},
         checks::container_memory_limit},
        {{"memory-limit-below-model", "cgroup memory limit below the largest model's plan"},
         checks::memory_limit_below_model},
        {{"model-does-not-fit", "a configured model larger than every device's usable budget"},
         checks::model_does_not_fit},
        {{"budget-unknown", "a device whose usable budget could not be computed"}, checks::budget_unknown},
        {{"engine-build-missing", "a GPU that no engine build reaches (only CPU builds)"},
         checks::engine_build_missing},
        {{"limit-never-fits", "a configured limit (max_size, ctx x slots, audio length) no device can keep"},
         checks::limit_never_fits},
    };
    return all;
}

}  // namespace

std::string_view to_string(Severity s) {
    switch (s) {
        case Severity::info:
            return "info";
        case Severity::warning:
            return "warning";
        case Severity::error:
            return "error";
    }
    return "unknown";
}

const std::vector<CheckInfo>& all_checks() {
    static const std::vector<CheckInfo> infos = [] {
        std::vector<CheckInfo> v;
        for (const auto& c : registry()) v.push_back(c.info);
        return v;
    }();
    return infos;
}

std::vector<Finding> diagnose(const devices::DeviceReport& report, const Input& input) {
    std::vector<Finding> findings;
    for (const auto& c : registry()) c.run(report, input, findings);
    std::stable_sort(findings.begin(), findings.end(),
                     [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
    return findings;
}

bool has_errors(const std::vector<Finding>& findings) {
    return std::any_of(findings.begin(), findings.end(),
                       [](const Finding& f) { return f.severity == Severity::error; });
}

nlohmann::json to_json(const Finding& f) {
    nlohmann::json evidence = nlohmann::json::array();
    for (const auto& e : f.evidence) {
        nlohmann::json ej{{"what", e.what}, {"value", e.value}, {"from", e.from}};
        if (e.bytes) ej["bytes"] = *e.bytes;
        evidence.push_back(std::move(ej));
    }
    nlohmann::json j{{"id", f.id},
                     {"severity", to_string(f.severity)},
                     {"evidence", evidence},
                     {"explanation", f.explanation},
                     {"fix", f.fix}};
    if (!f.device.empty()) j["device"] = f.device;
    return j;
}

nlohmann::json to_json(const std::vector<Finding>& findings) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& f : findings) a.push_back(to_json(f));
    return a;
}

}  // namespace loch::doctor
