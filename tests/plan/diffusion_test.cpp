// The diffusion planner against sd.cpp's own buffer lines (issue 11's table, measured on synthetic models;
// bench/results/h200-2026-12-01-sd-buffers.txt for Flux on the H200): never under, and close (within 10 %
// where the quadratic term dominates), and its inverse questions.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/memory.hpp"
#include "gguf/writer.hpp"
#include "plan/diffusion.hpp"
#include "synth/diffusion.hpp"

using namespace loch;
using namespace loch::plan;

namespace {

DiffusionFiles sd1() {
    DiffusionFiles f;
    f.arch = DiffusionArch::sd1;
    f.diffusion_bytes = 1640 * kMiB;
    f.text_encoder_bytes = 235 * kMiB;
    f.vae_bytes = 160 * kMiB;
    return f;
}
DiffusionFiles flux(std::uint64_t hidden) {
    DiffusionFiles f;
    f.arch = DiffusionArch::flux;
    f.flux_hidden = hidden;
    f.diffusion_bytes = 12068 * kMiB;
    f.text_encoder_bytes = 235 * kMiB;
    f.vae_bytes = 160 * kMiB;
    return f;
}
double phase_mib(const DiffusionPlan& p, std::string_view name) {
    for (const auto& ph : p.phases)
        if (ph.name == name) return double(ph.bytes) / double(kMiB);
    ADD_FAILURE() << "no phase " << name;
    return 0;
}
void expect_close_above(double planned, double measured, double tolerance) {
    EXPECT_GE(planned, measured);
    EXPECT_LE(planned, measured * (1 + tolerance) + 8)
        << "planned " << planned << " MiB, measured " << measured;
}

}  // namespace

TEST(DiffusionPlan, Sd1UnetComputeMatchesSdCppsBufferLines) {
    const std::pair<std::uint64_t, double> measured[] = {
        {128, 14.1}, {256, 49.6}, {512, 559.9}, {768, 2690.3}, {1024, 8360.9}};
    for (const auto& [side, mib] : measured)
        expect_close_above(phase_mib(plan_diffusion(sd1(), {}, side, side), "diffusion step"), mib, 0.10);
}

TEST(DiffusionPlan, Sd1FlashAttentionIsLinearOnlyWhenTheTokensAreWhole256Blocks) {
    DiffusionOptions fa;
    fa.flash_attention = true;
    const std::pair<std::uint64_t, double> measured[] = {
        {128, 7.9}, {256, 30.9}, {512, 123.1}, {768, 276.6}, {1024, 491.6}};
    for (const auto& [side, mib] : measured)
        expect_close_above(phase_mib(plan_diffusion(sd1(), fa, side, side), "diffusion step"), mib, 0.10);
    // 576²: L = 5184 is not a multiple of 256 — padded with a mask, 257 MiB instead of the linear 155.
    expect_close_above(phase_mib(plan_diffusion(sd1(), fa, 576, 576), "diffusion step"), 257.0, 0.10);
}

TEST(DiffusionPlan, FluxAttentionGrowsWithTheSquareOfTheImageTokens) {
    const std::pair<std::uint64_t, double> measured[] = {{512, 341.5}, {768, 973.1}, {1024, 2361.3}};
    for (const auto& [side, mib] : measured)
        expect_close_above(phase_mib(plan_diffusion(flux(3072), {}, side, side), "diffusion step"), mib,
                           0.15);
    const auto at1k = plan_diffusion(flux(3072), {}, 1024, 1024),
               at2k = plan_diffusion(flux(3072), {}, 2048, 2048);
    EXPECT_GT(phase_mib(at2k, "diffusion step"), 10 * phase_mib(at1k, "diffusion step"));
    DiffusionOptions fa;
    fa.flash_attention = true;
    EXPECT_LT(phase_mib(plan_diffusion(flux(3072), fa, 2048, 2048), "diffusion step"),
              phase_mib(at2k, "diffusion step") / 9);
}

// Issue 26, H200 (bench/results/h200-2026-12-03-sd-sweep.md): Flux.1-dev with flash attention and VAE tiling
// at 3008x2000 (N = 23756 tokens, not a multiple of 256) logged a 7282 MiB step where the linear term alone
// is 4259: sd.cpp builds a padding mask (f32 concatenation + f16 cast). The whole process peaked at 20726
// MiB and kept 13444 MiB after the request; SD1.5 with both options at 2048x1152 peaked at 4008 and kept
// 2896 (its flash attention's pool is larger than other phases').
TEST(DiffusionPlan, FlashAttentionWithTilingAtAnyAspectIsNeverUnderTheH200) {
    DiffusionOptions both;
    both.flash_attention = both.vae_tiling = both.gpu = true;
    const auto process = kDiffusionGpuContextBytes;
    struct Row {
        DiffusionFiles files;
        std::uint64_t w, h;
        double step_line_mib, peak_mib, idle_mib;
    };
    DiffusionFiles f = flux(3072), s = sd1();
    // The synthetic files' weights as the H200 run had them (its planned idle less the context).
    f.diffusion_bytes = 12100 * kMiB, f.text_encoder_bytes = 126 * kMiB, f.vae_bytes = 160 * kMiB;
    s.diffusion_bytes = 1640 * kMiB, s.text_encoder_bytes = 235 * kMiB, s.vae_bytes = 160 * kMiB;
    for (const Row& r : {Row{f, 3008, 2000, 7281.7, 20726, 13444}, Row{f, 1344, 768, 830.0, 13956, 13124},
                         Row{s, 2048, 1152, 1110.7, 4008, 2896}}) {
        const auto p = plan_diffusion(r.files, both, r.w, r.h);
        EXPECT_GE(phase_mib(p, "diffusion step"), r.step_line_mib) << r.w << "x" << r.h;
        const double peak = double(p.device_weights + process + p.device_compute) / double(kMiB);
        const double idle = double(p.device_weights + process + p.device_pool) / double(kMiB);
        EXPECT_GE(peak, r.peak_mib) << r.w << "x" << r.h;
        EXPECT_LE(peak, r.peak_mib * 1.05) << r.w << "x" << r.h;
        EXPECT_GE(idle, r.idle_mib) << r.w << "x" << r.h;
    }
}

// Every H200 image measurement of issue 26 (bench/results/h200-2026-12-03-sd-sweep.jsonl and
// -sd-verify.jsonl): Flux.1-dev and SD1.5, each option alone and combined, square and non-square. What loch
// books is never under the process's peak during the request nor under what the idle engine keeps after it,
// and the peak's over-reservation stays within the goals (median |error| <= 1 %, p95 over <= 5 %).
TEST(DiffusionPlan, TheH200ImageSweepIsNeverUnderAndCloseDuringAndAfterTheRequest) {
    DiffusionFiles f = flux(3072), s = sd1();
    f.diffusion_bytes = 12100 * kMiB, f.text_encoder_bytes = 126 * kMiB, f.vae_bytes = 160 * kMiB;
    struct Row {
        bool flux, fa, tiling;
        std::uint64_t w, h;
        double peak_mib, idle_mib;
    };
    const Row rows[] = {
        {true, false, true, 1024, 1024, 15486, 13124}, {true, false, true, 1344, 768, 15426, 13124},
        {true, false, true, 3000, 2000, 68486, 13444}, {true, true, true, 1024, 1024, 13906, 13124},
        {true, true, true, 1344, 768, 13956, 13124},   {true, true, true, 3000, 2000, 20726, 13444},
        {true, true, true, 2048, 1152, 14892, 13210},  {true, false, false, 1024, 1024, 20214, 13556},
        {true, false, false, 1344, 768, 20102, 13548}, {true, false, false, 3000, 2000, 68486, 15974},
        {true, true, false, 1024, 1024, 20214, 13556}, {true, true, false, 1344, 768, 20102, 13548},
        {true, true, false, 3000, 2000, 54066, 15974}, {false, false, false, 512, 512, 4424, 2758},
        {false, false, false, 1024, 768, 8008, 3014},  {false, false, false, 2048, 1152, 44678, 3782},
        {false, true, false, 512, 512, 4422, 2820},    {false, true, false, 1024, 768, 8070, 3076},
        {false, true, false, 2048, 1152, 18822, 3844}, {false, false, true, 512, 512, 3214, 2662},
        {false, false, true, 1024, 768, 7436, 2698},   {false, false, true, 2048, 1152, 44678, 2834},
        {false, true, true, 512, 512, 3142, 2724},     {false, true, true, 1024, 768, 3178, 2760},
        {false, true, true, 2048, 1152, 4008, 2896},   {false, true, true, 1344, 768, 3272, 2782},
    };
    std::vector<double> errors;
    for (const auto& r : rows) {
        DiffusionOptions o;
        o.gpu = true;
        o.flash_attention = r.fa;
        o.vae_tiling = r.tiling;
        const auto p = plan_diffusion(r.flux ? f : s, o, r.w, r.h);
        const double base = double(p.device_weights + kDiffusionGpuContextBytes) / double(kMiB);
        const double peak = base + double(p.device_compute) / double(kMiB);
        const double idle = base + double(p.device_pool) / double(kMiB);
        const std::string what = fmt::format("{} fa={} tiling={} {}x{}: booked {:.0f} / {:.0f} idle",
                                             r.flux ? "flux" : "sd1", r.fa, r.tiling, r.w, r.h, peak, idle);
        EXPECT_GE(peak, r.peak_mib) << what;
        EXPECT_GE(idle, r.idle_mib) << what;
        errors.push_back((peak - r.peak_mib) / r.peak_mib);
    }
    std::vector<double> abs_errors;
    for (double e : errors) abs_errors.push_back(std::fabs(e));
    std::sort(errors.begin(), errors.end());
    std::sort(abs_errors.begin(), abs_errors.end());
    const double median = abs_errors[abs_errors.size() / 2];
    const double p95 = errors[static_cast<std::size_t>(std::ceil(0.95 * double(errors.size()))) - 1];
    EXPECT_LE(median, 0.01) << "median |error|";
    EXPECT_LE(p95, 0.05) << "p95 over";
}

TEST(DiffusionPlan, DecodersPerPixelTilingAndTheTinyDecoder) {
    const std::pair<std::uint64_t, double> vae[] = {{128, 104.0}, {256, 416.0}, {512, 1664.1}, {768, 3744.1}};
    for (const auto& [side, mib] : vae)
        expect_close_above(phase_mib(plan_diffusion(sd1(), {}, side, side), "decoder"), mib, 0.02);
    DiffusionOptions tiled;
    tiled.vae_tiling = true;
    // The 256² tile, + the output image in host memory (32 B/px on the CPU device).
    EXPECT_NEAR(phase_mib(plan_diffusion(sd1(), tiled, 2048, 2048), "decoder") - 32.0 * 4, 417.1, 0.1);
    auto tiny = sd1();
    tiny.tiny_decoder = true;
    const std::pair<std::uint64_t, double> tae[] = {{128, 30.0}, {512, 480.1}, {1024, 1920.3}};
    for (const auto& [side, mib] : tae)
        expect_close_above(phase_mib(plan_diffusion(tiny, {}, side, side), "decoder"), mib, 0.02);
    // The request's reservation is the largest phase: at 1024² the SD1 UNet's attention, not the decoder.
    const auto p = plan_diffusion(sd1(), {}, 1024, 1024);
    EXPECT_EQ(p.largest_phase, "diffusion step");
    EXPECT_EQ(p.device_compute, std::uint64_t(phase_mib(p, "diffusion step") * double(kMiB)));
}

// Measured on lavapipe with the Vulkan sd-server (docs/images.md, "Vulkan's blocks"): a phase above
// ggml-vulkan's 1 GiB block is allocated in blocks whose tensors are not reused across them. TAEF1 at 1344²:
// 4797.60 MiB
// ("taesd compute buffer size", -v) where one buffer would be 3309 MiB; Flux-tiny's step there (506.46 MiB,
// one block) is unchanged; the same phases on CUDA are one buffer each.
TEST(DiffusionPlan, APhaseAboveOneVulkanBlockIsBookedForTheBlocksAndNeverUnderLavapipe) {
    auto tiny = flux(256);
    tiny.tiny_decoder = true;
    DiffusionOptions vk;
    vk.gpu = true;
    vk.vulkan_block = vulkan_block("vulkan", 2ull << 30);  // lavapipe: maxMemoryAllocationSize 2 GiB
    EXPECT_EQ(vk.vulkan_block, 1ull << 30);
    DiffusionOptions cuda;
    cuda.gpu = true;
    const auto on_vk = plan_diffusion(tiny, vk, 1344, 1344);
    const auto on_cuda = plan_diffusion(tiny, cuda, 1344, 1344);
    EXPECT_GE(phase_mib(on_vk, "decoder"), 4797.60);
    EXPECT_LE(phase_mib(on_vk, "decoder"), 4797.60 * 1.25);
    EXPECT_NEAR(phase_mib(on_vk, "decoder") / phase_mib(on_cuda, "decoder"), kVulkanBlocksTinyDecoder, 0.001);
    EXPECT_GE(phase_mib(on_vk, "diffusion step"), 506.46);
    EXPECT_EQ(phase_mib(on_vk, "diffusion step"), phase_mib(on_cuda, "diffusion step"));  // one block
    EXPECT_EQ(on_vk.device_compute, std::max(on_vk.phases[1].bytes, on_vk.phases[2].bytes));
    // Below one block, Vulkan and CUDA book the same; a smaller driver limit makes the block smaller.
    EXPECT_EQ(plan_diffusion(tiny, vk, 512, 512).device_compute,
              plan_diffusion(tiny, cuda, 512, 512).device_compute);
    vk.vulkan_block = vulkan_block("vulkan", 256ull << 20);
    EXPECT_GT(plan_diffusion(tiny, vk, 512, 512).device_compute,
              plan_diffusion(tiny, cuda, 512, 512).device_compute);
    EXPECT_EQ(vulkan_block("cuda", 256ull << 20), 0u);
    EXPECT_EQ(vulkan_block("vulkan", 0), 1ull << 30);
}

TEST(DiffusionPlan, SizesAreAlignedAsSdCppAlignsThem) {
    EXPECT_EQ(aligned_size(DiffusionArch::sd1, 500, 300),
              (std::pair<std::uint64_t, std::uint64_t>{512, 320}));
    EXPECT_EQ(aligned_size(DiffusionArch::flux, 500, 300),
              (std::pair<std::uint64_t, std::uint64_t>{512, 304}));
    EXPECT_EQ(plan_diffusion(sd1(), {}, 1000, 1000).width, 1024u);
}

TEST(DiffusionPlan, PlacementFlagsMoveComponentsOffAGpuAndNotOffTheCpu) {
    DiffusionOptions o;
    o.clip_on_cpu = o.vae_on_cpu = true;
    const auto cpu = plan_diffusion(sd1(), o, 512, 512);
    EXPECT_EQ(cpu.device_weights, (1640 + 235 + 160) * kMiB);  // the CPU device holds everything anyway
    EXPECT_EQ(cpu.host_weights, 0u);
    o.gpu = true;
    const auto gpu = plan_diffusion(sd1(), o, 512, 512);
    EXPECT_EQ(gpu.device_weights, 1640 * kMiB);
    EXPECT_EQ(gpu.host_weights, (235 + 160) * kMiB);
    // The decoder runs on the CPU: its 1.6 GiB is host compute, the device's largest phase is the UNet's.
    EXPECT_EQ(gpu.largest_phase, "diffusion step");
    EXPECT_GE(gpu.host_compute, 1664 * kMiB);
    // offload_to_cpu: nothing resident between requests; each phase brings its own component.
    DiffusionOptions off;
    off.gpu = off.offload_to_cpu = true;
    const auto moved = plan_diffusion(sd1(), off, 512, 512);
    EXPECT_EQ(moved.device_weights, 0u);
    EXPECT_EQ(moved.host_weights, (1640 + 235 + 160) * kMiB);
    EXPECT_GE(phase_mib(moved, "diffusion step"), 1640 + 560);
}

// Flux.2-dev with --offload-to-cpu on the H200 (bench/results/h200-2026-12-04-flux2-settings.jsonl): the idle
// engine held 1164 MiB (its context and pool), and 1024² peaked at 35,560 MiB — the diffusion model (32,651
// MiB at Q8_0) and its step, never the three components at once. Booked: context + the largest phase with its
// component, never under and within 1 %.
TEST(DiffusionPlan, OffloadToCpuBooksEachPhaseWithItsOwnComponentAsTheH200Measured) {
    DiffusionFiles f = flux(6144);
    f.flux2 = true;
    f.diffusion_bytes = 34'237'284'352;
    f.text_encoder_bytes = 25'046'896'640;
    f.vae_bytes = 168'224'396;
    DiffusionOptions o;
    o.gpu = o.offload_to_cpu = o.flash_attention = true;
    const auto p = plan_diffusion(f, o, 1024, 1024);
    const double peak =
        double(p.device_weights + kDiffusionGpuContextBytes + p.device_compute) / double(kMiB);
    EXPECT_GE(peak, 35560.0);
    EXPECT_LE(peak, 35560.0 * 1.01);
    const double idle = double(p.device_weights + kDiffusionGpuContextBytes + p.device_pool) / double(kMiB);
    EXPECT_GE(idle, 1164.0);
    EXPECT_EQ(p.largest_phase, "diffusion step");
}

TEST(DiffusionPlan, InverseQuestionsFindTheLargestSizeAndTheOptionsThatFit) {
    const auto f = sd1();
    const std::uint64_t budget = 3 * kGiB;
    const auto fit = largest_fitting(f, {}, 1024, 1024, budget);
    ASSERT_TRUE(fit);
    EXPECT_LE(plan_diffusion(f, {}, fit->first, fit->second).device_compute, budget);
    EXPECT_GT(plan_diffusion(f, {}, fit->first + 64, fit->second + 64).device_compute, budget);
    EXPECT_EQ(fit->first, fit->second);  // the same shape
    const auto wide = largest_fitting(f, {}, 2048, 1024, budget);
    ASSERT_TRUE(wide);
    EXPECT_NEAR(double(wide->first) / double(wide->second), 2.0, 0.25);
    // 1024²: 8.2 GiB of attention. Flash attention fits it in 3 GiB (the decoder's 6.5 GiB then does not,
    // so only flash attention + tiling would): neither alone, both together.
    const auto alone = options_that_fit(f, {}, 1024, 1024, budget);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_NE(alone[0].find("together"), std::string::npos) << alone[0];
    DiffusionOptions tiled;
    tiled.vae_tiling = true;
    const auto helps = options_that_fit(f, tiled, 1024, 1024, budget);
    ASSERT_EQ(helps.size(), 1u);
    EXPECT_NE(helps[0].find("flash attention"), std::string::npos);
    EXPECT_FALSE(largest_fitting(f, {}, 1024, 1024, 1 * kMiB));
}

// Flux.2-dev (Q8_0) with Mistral Small 3.2 (Q8_0) and its VAE on the H200, 2026-12-04
// (bench/h200-sd-accuracy.sh flux2-dev+vae,flux2-dev-fa+vae 512,1024,1536,1344x768): sd.cpp's diffusion-step
// lines, which the Flux.1 rule (256 text tokens, 50 B per width and token) was under at 1536².
TEST(DiffusionPlan, Flux2DevDiffusionStepIsNeverUnderTheH200Lines) {
    DiffusionFiles f = flux(6144);
    f.flux2 = true;
    struct Row {
        bool fa;
        std::uint64_t w, h;
        double step_mib;
    };
    const Row rows[] = {{false, 512, 512, 980.0},     {false, 1024, 1024, 5472.5},
                        {false, 1536, 1536, 20600.0}, {false, 1344, 768, 5344.16},
                        {true, 512, 512, 656.0},      {true, 1024, 1024, 2124.5},
                        {true, 1536, 1536, 4412.0},   {true, 1344, 768, 2149.91}};
    for (const auto& r : rows) {
        DiffusionOptions o;  // the graph's buffer, as sd.cpp's line counts it (the CUDA pool comes on top)
        o.flash_attention = r.fa;
        const auto p = plan_diffusion(f, o, r.w, r.h);
        SCOPED_TRACE(fmt::format("fa={} {}x{}", r.fa, r.w, r.h));
        expect_close_above(phase_mib(p, "diffusion step"), r.step_mib, 0.11);
    }
}

TEST(DiffusionPlan, TheFilesGiveTheArchitectureAndTheWeightsPerComponent) {
    const auto dir = std::filesystem::temp_directory_path() / "loch-diffusion-plan-test";
    std::filesystem::create_directories(dir);
    const auto write = [&](const char* preset, const char* file) {
        gguf::write_file(dir / file, synth::build_diffusion(*synth::find_diffusion_preset(preset)));
        return dir / file;
    };
    const auto one = read_diffusion_files(write("sd1.5", "sd15.gguf"), {});
    EXPECT_EQ(one.arch, DiffusionArch::sd1);
    // UNet 859.5 M, CLIP-L 123 M, VAE 83.7 M parameters, mostly f16.
    EXPECT_NEAR(double(one.diffusion_bytes) / 1e9, 1.72, 0.05);
    EXPECT_NEAR(double(one.text_encoder_bytes) / 1e9, 0.24, 0.03);
    EXPECT_NEAR(double(one.vae_bytes) / 1e9, 0.17, 0.03);
    const auto split = read_diffusion_files(
        write("flux-tiny", "flux.gguf"),
        {{"clip_l", write("clip-l", "clip.gguf")}, {"taesd", write("taef1", "taef1.gguf")}});
    EXPECT_EQ(split.arch, DiffusionArch::flux);
    EXPECT_EQ(split.flux_hidden, 256u);
    EXPECT_TRUE(split.tiny_decoder);
    EXPECT_GT(split.text_encoder_bytes, 200'000'000u);
    EXPECT_FALSE(split.flux2);
    const auto two = read_diffusion_files(write("flux2-tiny", "flux2.gguf"), {});
    EXPECT_EQ(two.arch, DiffusionArch::flux);
    EXPECT_TRUE(two.flux2);
    EXPECT_EQ(two.flux_hidden, 256u);
    EXPECT_EQ(two.llm_hidden, 0u);
    std::filesystem::remove_all(dir);
}

// The Vulkan trap in one number: the largest single tensor. Flux.2-dev's decoder at 1024² needs one 4.5 GiB
// im2col buffer (the 256-channel 3x3 convolutions at full resolution, f16): above RADV's 4 GiB largest
// allocation, at 512² far below; direct convolutions and tiling bring it under, as the refusal says.
TEST(DiffusionPlan, TheLargestTensorIsTheDecodersIm2colAt1024AndTheOptionsBringItUnderFourGib) {
    DiffusionFiles f = flux(6144);
    f.flux2 = true;
    DiffusionOptions o;
    o.gpu = true;
    o.flash_attention = true;
    const std::uint64_t radv = 4294967292;
    const auto big = plan_diffusion(f, o, 1024, 1024);
    EXPECT_EQ(big.largest_tensor, 256ull * 9 * 2 * 1024 * 1024);  // 4.5 GiB
    EXPECT_EQ(big.largest_tensor_phase, "decoder");
    EXPECT_NE(big.largest_tensor_what.find("im2col"), std::string::npos);
    EXPECT_LT(plan_diffusion(f, o, 512, 512).largest_tensor, radv);
    const auto help = options_under_allocation(f, o, 1024, 1024, radv);
    const auto has = [&](std::string_view what) {
        return std::any_of(help.begin(), help.end(),
                           [&](const std::string& h) { return h.find(what) != h.npos; });
    };
    EXPECT_TRUE(has("sd.vae_conv_direct: true")) << fmt::format("{}", fmt::join(help, "\n"));
    EXPECT_TRUE(has("sd.vae_tiling: true"));
    EXPECT_TRUE(has("sd.vae_on_cpu: true"));
    // Without flash attention the scores are one tensor: 48 heads x N^2 x 4 B (N = 4096 + 512 at 1024²).
    o.flash_attention = false;
    o.vae_conv_direct = true;
    const auto scores = plan_diffusion(f, o, 1024, 1024);
    EXPECT_EQ(scores.largest_tensor, 48ull * 4608 * 4608 * 4);
    EXPECT_EQ(scores.largest_tensor_phase, "diffusion step");
    // A decoder on the CPU is not the device's allocation.
    o.vae_conv_direct = false;
    o.flash_attention = true;
    o.vae_on_cpu = true;
    EXPECT_NE(plan_diffusion(f, o, 1024, 1024).largest_tensor_phase, "decoder");
}

// An LLM text encoder (Flux.2's Mistral) is quadratic in the prompt and sd.cpp cuts nothing: each request is
// costed from its prompt's bytes (a byte-level BPE never makes more tokens than bytes), never under what
// bench/sd-text-encoder.sh measured, and a short prompt keeps the allowance.
TEST(DiffusionPlan, AnLlmTextEncoderIsCostedFromThePromptsBytesAndNeverUnderTheMeasuredBuffers) {
    DiffusionFiles f = flux(256);
    f.flux2 = true;
    f.large_text_encoder = true;
    f.llm_hidden = 256;
    f.llm_ffn = 512;
    DiffusionOptions o;
    const auto te = [&](std::uint64_t bytes) {
        o.prompt_bytes = bytes;
        return phase_mib(plan_diffusion(f, o, 64, 64), "text encoder");
    };
    EXPECT_EQ(te(30), 256.0);  // "a lighthouse at dusk": the allowance
    // bench/sd-text-encoder.sh: "lighthouse" x 300 and x 1200 (3299 and 13199 bytes) took 70 and 840 MiB.
    EXPECT_GE(te(3299), 70.0);
    EXPECT_GE(te(13199), 840.0);
    EXPECT_GT(te(13199), 3.5 * te(3299));  // quadratic
    // Mistral Small's real width: the FFN term grows with it (T x (3 x 32768 + 8 x 5120) x 4 B).
    const double tiny = te(3299);
    f.llm_hidden = 5120;
    f.llm_ffn = 32768;
    EXPECT_GT(te(3299), tiny + 1500.0);
    // Without an LLM (CLIP, T5) the allowance stays whatever the prompt.
    f.llm_hidden = f.llm_ffn = 0;
    EXPECT_EQ(te(13199), 256.0);
}

// The inverse answers for Flux.2-dev on the GPU: beside its 56 GiB of weights in a 64 GiB container (the
// Strix Halo traps tree: 5 GiB of room), 1024² does not fit; the largest square that does is the first whose
// compute is within the room and the next size up is not, and each option offered really fits.
TEST(DiffusionPlan, Flux2InverseAnswersAreTheLargestSizeThatFitsAndOptionsThatDo) {
    DiffusionFiles f = flux(6144);
    f.flux2 = true;
    f.large_text_encoder = true;
    DiffusionOptions o;
    o.gpu = o.flash_attention = true;
    const std::uint64_t room = 5 * kGiB;
    ASSERT_GT(plan_diffusion(f, o, 1024, 1024).device_compute, room);
    const auto fit = largest_fitting(f, o, 1024, 1024, room);
    ASSERT_TRUE(fit);
    EXPECT_EQ(fit->first, fit->second);  // the same aspect
    EXPECT_LE(plan_diffusion(f, o, fit->first, fit->second).device_compute, room);
    EXPECT_GT(plan_diffusion(f, o, fit->first + 64, fit->second + 64).device_compute, room);
    const auto options = options_that_fit(f, o, 1024, 1024, room);
    ASSERT_FALSE(options.empty());
    DiffusionOptions tiled = o;
    tiled.vae_tiling = true;
    EXPECT_LE(plan_diffusion(f, tiled, 1024, 1024).device_compute, room);
    EXPECT_NE(options.front().find("sd.vae_tiling: true"), std::string::npos) << options.front();
}
