// `loch plan MODEL --width W --height H [components] [sd flags] [--fit BYTES]`: what one image generation
// with stable-diffusion.cpp needs — weights per component and where they sit, compute per phase with its
// formula, the peak — and, against a budget, the largest size that fits and the options that would make
// this size fit.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/plan_image.hpp"
#include "cli/text.hpp"
#include "core/memory.hpp"
#include "plan/diffusion.hpp"
#include "plan/plan.hpp"

namespace loch::cli {

void add_image_plan_options(CLI::App& cmd, ImagePlanOptions& o) {
    cmd.add_option("--width", o.width, "image width (an image model: plan one generation)")
        ->check(CLI::Range(16u, 16384u));
    cmd.add_option("--height", o.height, "image height")->check(CLI::Range(16u, 16384u));
    for (const char* c : {"clip_l", "clip_g", "t5xxl", "llm", "vae", "taesd"})
        cmd.add_option(fmt::format("--{}", c), o.components[c],
                       fmt::format("the {} file (sd-server's --{})", c, c));
    cmd.add_flag("--diffusion-fa", o.opts.flash_attention, "flash attention in the diffusion model");
    cmd.add_flag("--vae-tiling", o.opts.vae_tiling, "decode in 256x256 tiles");
    cmd.add_flag("--vae-conv-direct", o.opts.vae_conv_direct, "direct convolutions in the VAE");
    cmd.add_flag("--clip-on-cpu", o.opts.clip_on_cpu, "text encoders on the CPU (with a GPU --device)");
    cmd.add_flag("--vae-on-cpu", o.opts.vae_on_cpu, "VAE on the CPU (with a GPU --device)");
    cmd.add_flag("--offload-to-cpu", o.opts.offload_to_cpu, "weights in RAM, moved to the GPU per phase");
}

bool is_image_plan(const ImagePlanOptions& o) {
    return o.width || o.height;
}

void run_image_plan(const ImagePlanOptions& io, const std::string& file, const std::string& device,
                    const std::string& fit, bool json) {
    if (file.empty()) throw std::runtime_error("an image plan needs the model file");
    std::vector<std::pair<std::string, std::filesystem::path>> parts;
    for (const auto& [role, path] : io.components)
        if (!path.empty()) parts.emplace_back(role, path);
    const auto files = plan::read_diffusion_files(file, parts);
    auto opts = io.opts;
    opts.gpu = device != "cpu";
    // (A Vulkan device by name: ggml's own block; the driver's smaller limit is `loch devices`'.)
    opts.vulkan_block = plan::vulkan_block(device.starts_with("vulkan") ? "vulkan" : "", 0);
    const std::uint64_t w = io.width ? io.width : io.height, h = io.height ? io.height : io.width;
    const auto p = plan::plan_diffusion(files, opts, w, h);
    const std::uint64_t process = plan::diffusion_process_bytes(files, opts.gpu);
    const std::uint64_t peak = p.device_weights + process + p.device_compute;
    nlohmann::json phases = nlohmann::json::array();
    for (const auto& ph : p.phases)
        phases.push_back({{"phase", ph.name},
                          {"bytes", ph.bytes},
                          {"on", ph.on_device ? device : "cpu"},
                          {"source", "formula"},
                          {"formula", ph.formula}});
    nlohmann::json out = {{"model", file},
                          {"architecture", plan::to_string(files.arch)},
                          {"device", device},
                          {"width", p.width},
                          {"height", p.height},
                          {"weights",
                           {{"diffusion_model_bytes", files.diffusion_bytes},
                            {"text_encoders_bytes", files.text_encoder_bytes},
                            {"decoder_bytes", files.vae_bytes},
                            {"on_device_bytes", p.device_weights},
                            {"on_cpu_bytes", p.host_weights},
                            {"source", "file tensors"}}},
                          {"process_bytes", process},
                          {"phases", phases},
                          {"largest_phase", p.largest_phase},
                          {"compute_bytes", p.device_compute},
                          // One allocation on Vulkan: what a driver's maxMemoryAllocationSize bounds.
                          {"largest_tensor_bytes", p.largest_tensor},
                          {"largest_tensor", p.largest_tensor_what + " (" + p.largest_tensor_phase + ")"},
                          {"peak_bytes", peak},
                          {"peak_source", "formula"}};
    if (!json) {
        std::printf("image plan: %s (%s) at %llux%llu on %s\n", file.c_str(),
                    std::string(plan::to_string(files.arch)).c_str(), (unsigned long long)p.width,
                    (unsigned long long)p.height, device.c_str());
        std::printf("  weights (from the files' tensors)        MiB\n");
        std::printf("    diffusion model              %12s\n", mib_text(files.diffusion_bytes).c_str());
        std::printf("    text encoders                %12s%s\n", mib_text(files.text_encoder_bytes).c_str(),
                    opts.gpu && opts.clip_on_cpu ? "  (on the CPU)" : "");
        std::printf("    decoder                      %12s%s\n", mib_text(files.vae_bytes).c_str(),
                    opts.gpu && opts.vae_on_cpu ? "  (on the CPU)" : "");
        std::printf("  compute per phase (one after another; each frees its buffer)\n");
        for (const auto& ph : p.phases)
            std::printf("    %-28s %12s  %s%s\n", ph.name.c_str(), mib_text(ph.bytes).c_str(),
                        ph.formula.c_str(), ph.on_device ? "" : "  (on the CPU)");
        std::printf("  peak on %s: weights %s + %s %s + %s %s = %s MiB (formula)\n", device.c_str(),
                    mib_text(p.device_weights).c_str(), opts.gpu ? "GPU context" : "process",
                    mib_text(process).c_str(), p.largest_phase.c_str(), mib_text(p.device_compute).c_str(),
                    mib_text(peak).c_str());
        if (p.host_weights || p.host_compute)
            std::printf("  on the CPU: weights %s + compute %s MiB\n", mib_text(p.host_weights).c_str(),
                        mib_text(p.host_compute).c_str());
    }
    if (!fit.empty()) {
        const auto budget = plan::parse_bytes(fit);
        if (!budget)
            throw std::runtime_error(fmt::format("--fit '{}': give a size like 24GiB or 512MiB", fit));
        const std::uint64_t fixed = p.device_weights + process;
        const std::uint64_t room = *budget > fixed ? *budget - fixed : 0;
        const auto largest = plan::largest_fitting(files, opts, p.width, p.height, room);
        const auto helps = plan::options_that_fit(files, opts, p.width, p.height, room);
        out["fit"] = {
            {"budget_bytes", *budget},
            {"room_for_compute_bytes", room},
            {"fits", peak <= *budget},
            {"largest_size", largest ? nlohmann::json(fmt::format("{}x{}", largest->first, largest->second))
                                     : nlohmann::json(nullptr)},
            {"options_that_fit", helps}};
        if (!json) {
            std::printf("\nfit in %s MiB: %s\n", mib_text(*budget).c_str(),
                        peak <= *budget ? "this size fits" : "this size does not fit");
            std::printf("  room for compute beside the weights: %s MiB\n", mib_text(room).c_str());
            if (largest)
                std::printf("  largest size of this shape that fits: %llux%llu\n",
                            (unsigned long long)largest->first, (unsigned long long)largest->second);
            else
                std::printf("  no size fits: the weights alone take %s MiB\n", mib_text(fixed).c_str());
            for (const auto& hlp : helps) std::printf("  would fit at this size: %s\n", hlp.c_str());
        }
    }
    if (json) std::printf("%s\n", pretty_json(out).c_str());
}

}  // namespace loch::cli
