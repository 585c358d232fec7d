#include "plan/plan.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "plan/compute.hpp"

namespace loch::plan {
namespace {

using gguf::GgmlType;

constexpr std::uint32_t pad(std::uint32_t x, std::uint32_t n) {
    return (x + n - 1) / n * n;
}
constexpr std::uint64_t align_up(std::uint64_t x, std::uint64_t a) {
    return (x + a - 1) / a * a;
}

std::uint64_t row_bytes(GgmlType t, std::uint64_t n) {
    auto b = gguf::bytes_for(t, n);
    if (!b)
        throw std::runtime_error(
            fmt::format("a KV row of {} elements is not a whole number of {} blocks ({} per block)", n,
                        gguf::traits(t).name, gguf::traits(t).block_size));
    return *b;
}

bool is_gpu(std::string_view device) {
    return device != "cpu";
}

// "blk.12.ffn_up_exps.weight" → 12; nullopt for non-layer tensors.
std::optional<std::uint32_t> layer_of(std::string_view name) {
    if (!name.starts_with("blk.")) return std::nullopt;
    name.remove_prefix(4);
    std::uint32_t il = 0;
    auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), il);
    if (ec != std::errc{} || p == name.data() + name.size() || *p != '.') return std::nullopt;
    return il;
}

// Types ggml-cpu/repack.cpp repacks (ggml_repack_get_optimal_repack_type) on the CPUs of this build's
// architecture — the engine runs on the machine loch runs on. x86-64: Q4_0, Q4_K, IQ4_NL, MXFP4 need AVX2,
// Q2_K AVX-512 (counted: a plan may not be under on a machine that has it). ARM: also Q5_K, Q6_K, Q8_0.
bool repackable(gguf::GgmlType t) {
    using T = gguf::GgmlType;
    if (t == T::Q4_0 || t == T::Q4_K || t == T::IQ4_NL || t == T::MXFP4 || t == T::Q2_K) return true;
#if defined(__aarch64__) || defined(__arm__)
    return t == T::Q5_K || t == T::Q6_K || t == T::Q8_0;
#else
    return false;
#endif
}

bool is_expert_tensor(std::string_view name) {
    return name.find("_exps.") != std::string_view::npos || name.find("_exps") + 5 == name.size();
}

struct Placement {
    std::vector<int> layer_device;  // index into gpus, or -1 for CPU; size n_layer + 1 (last: output layer)
    int offloaded = 0;
};

Placement place_layers(const ModelShape& s, const Settings& st) {
    const int n_layer_all = static_cast<int>(s.n_layer);
    const int n_dev = static_cast<int>(st.gpus.size());
    const int ngl = st.n_gpu_layers < 0 ? n_layer_all + 1 : st.n_gpu_layers;
    // llama-model.cpp load_tensors: i_gpu_start, act_gpu_layers and the split points.
    const int i_gpu_start = std::max(n_layer_all + 1 - ngl, 0);
    const int act = n_dev == 0 ? 0 : std::min(ngl, n_layer_all + 1);
    std::vector<float> splits(static_cast<std::size_t>(n_dev), 1.0f);
    if (!st.tensor_split.empty()) {
        if (st.tensor_split.size() != st.gpus.size())
            throw std::runtime_error(
                fmt::format("--tensor-split has {} values for {} GPUs", st.tensor_split.size(), n_dev));
        splits = st.tensor_split;
    }
    float sum = 0;
    for (auto& x : splits) {
        if (!(x >= 0)) throw std::runtime_error("--tensor-split values must be >= 0");
        sum += x;
        x = sum;
    }
    if (n_dev > 0 && sum <= 0) throw std::runtime_error("--tensor-split values sum to 0");
    for (auto& x : splits) x /= sum;

    Placement p;
    p.layer_device.assign(static_cast<std::size_t>(n_layer_all + 1), -1);
    for (int il = 0; il <= n_layer_all; ++il) {
        if (il < i_gpu_start || il - i_gpu_start >= act) continue;
        float f = static_cast<float>(il - i_gpu_start) / static_cast<float>(act);
        int d = static_cast<int>(std::upper_bound(splits.begin(), splits.end(), f) - splits.begin());
        p.layer_device[static_cast<std::size_t>(il)] = std::min(d, n_dev - 1);
    }
    p.offloaded = n_dev == 0 ? 0 : std::min(ngl, n_layer_all + 1);
    return p;
}

}  // namespace

std::optional<FlashAttn> flash_attn_from_string(std::string_view s) {
    if (s == "on" || s == "1" || s == "true") return FlashAttn::on;
    if (s == "off" || s == "0" || s == "false") return FlashAttn::off;
    if (s == "auto") return FlashAttn::automatic;
    return std::nullopt;
}

const DevicePlan* Plan::find(std::string_view device) const {
    for (const auto& d : devices)
        if (d.device == device) return &d;
    return nullptr;
}

std::uint64_t Plan::gpu_total() const {
    std::uint64_t t = 0;
    for (const auto& d : devices)
        if (is_gpu(d.device)) t += d.total();
    return t;
}

namespace {

struct Derived {
    std::uint32_t n_ctx, n_ctx_seq, n_stream, n_ctx_swa, n_batch, n_ubatch, n_outputs;
    bool flash_attn;
};

Derived derive(const ModelShape& s, const Settings& st) {
    if (st.n_parallel == 0) throw std::runtime_error("n_parallel must be at least 1");
    if (st.n_ubatch == 0 || st.n_batch == 0)
        throw std::runtime_error("n_batch and n_ubatch must be at least 1");
    Derived d{};
    std::uint32_t n_ctx = st.n_ctx == 0 ? s.n_ctx_train : st.n_ctx;
    if (n_ctx == 0) throw std::runtime_error("n_ctx is 0 and the model declares no context_length");
    if (n_ctx > (1u << 30)) throw std::runtime_error(fmt::format("n_ctx {} is out of range", n_ctx));
    // llama-context.cpp: n_ctx = GGML_PAD(n_ctx, 256); per-stream contexts padded again and multiplied back.
    d.n_ctx = pad(n_ctx, 256);
    if (st.kv_unified) {
        d.n_ctx_seq = d.n_ctx;
        d.n_stream = 1;
    } else {
        d.n_ctx_seq = pad(d.n_ctx / st.n_parallel, 256);
        if (d.n_ctx_seq == 0) d.n_ctx_seq = 256;
        d.n_ctx = d.n_ctx_seq * st.n_parallel;
        d.n_stream = st.n_parallel;
    }
    // tools/server/server.cpp: embeddings need a whole prompt in one ubatch, so n_batch = n_ubatch.
    const std::uint32_t batch = st.embeddings ? std::min(st.n_batch, st.n_ubatch) : st.n_batch;
    d.n_batch = std::min(d.n_ctx, batch);
    d.n_ubatch = std::min(d.n_batch, st.n_ubatch);
    // llama-kv-cache-iswa.cpp: the SWA cache keeps the window plus one ubatch, padded to 256.
    if (s.any_swa()) {
        d.n_ctx_swa =
            st.swa_full
                ? d.n_ctx_seq
                : pad(std::min(d.n_ctx_seq, s.n_swa * (st.kv_unified ? st.n_parallel : 1) + d.n_ubatch), 256);
    }
    const bool all_outputs = st.embeddings || (!st.pooling.empty() && st.pooling != "none");
    // With a draft the target verifies n_max drafted tokens per slot at once (plan/draft.hpp).
    const std::uint32_t outputs_max = st.n_outputs_max ? st.n_outputs_max
                                      : all_outputs    ? d.n_batch
                                      : st.draft ? verify_outputs(st.n_batch, st.n_parallel, st.draft->n_max)
                                                 : st.n_parallel;
    d.n_outputs = std::min(d.n_ubatch, outputs_max);
    d.flash_attn = st.flash_attn != FlashAttn::off;
    if (!d.flash_attn && gguf::traits(st.type_v).quantized)
        throw std::runtime_error(
            fmt::format("a quantized V cache ({}) needs flash attention (llama.cpp refuses it otherwise)",
                        gguf::traits(st.type_v).name));
    return d;
}

// Per-layer KV bytes (K and V, all streams), llama-kv-cache.cpp constructor.
std::uint64_t layer_kv_bytes(const ModelShape& s, const Settings& st, const Derived& d, std::uint32_t il) {
    const std::uint64_t cells = s.is_swa[il] ? d.n_ctx_swa : d.n_ctx_seq;
    const std::uint64_t k = row_bytes(st.type_k, s.n_embd_k_gqa(il));
    // [TAG_V_CACHE_VARIABLE]: without flash attention V is transposed and padded to the widest layer.
    const std::uint32_t v_width = s.mla ? 0 : (d.flash_attn ? s.n_embd_v_gqa(il) : s.n_embd_v_gqa_max());
    const std::uint64_t v = v_width ? row_bytes(st.type_v, v_width) : 0;
    return (k + v) * cells * d.n_stream;
}

}  // namespace

std::uint64_t kv_cache_bytes(const ModelShape& s, const Settings& st) {
    Derived d = derive(s, st);
    std::uint64_t total = 0;
    for (std::uint32_t il = 0; il < s.n_layer; ++il) total += layer_kv_bytes(s, st, d, il);
    return total;
}

Plan make_plan(const gguf::Model& model, const Settings& st) {
    Plan plan;
    plan.model_name = model.metadata.get_string("general.name").value_or(model.architecture());
    plan.shape = shape_of(model);
    plan.settings = st;
    const ModelShape& s = plan.shape;
    const Derived d = derive(s, st);
    plan.n_ctx = d.n_ctx;
    plan.n_ctx_seq = d.n_ctx_seq;
    plan.n_stream = d.n_stream;
    plan.n_ctx_swa = d.n_ctx_swa;
    plan.n_ubatch = d.n_ubatch;
    plan.flash_attn = d.flash_attn;

    const Placement pl = place_layers(s, st);
    plan.layers_offloaded = pl.offloaded;
    plan.layers_offloadable = static_cast<int>(s.n_layer) + 1;

    const std::size_t n_gpu = st.gpus.size();
    std::vector<DevicePlan> dev(n_gpu + 1);  // last: cpu
    for (std::size_t i = 0; i < n_gpu; ++i) dev[i].device = st.gpus[i];
    dev[n_gpu].device = "cpu";
    auto slot = [&](int gpu_index) -> DevicePlan& {
        return dev[gpu_index < 0 ? n_gpu : static_cast<std::size_t>(gpu_index)];
    };
    for (std::uint32_t il = 0; il <= s.n_layer; ++il) slot(pl.layer_device[il]).layers++;

    // ---- weights (llama-model.cpp load_tensors: input layer on the CPU, layers by split, output layer last)
    std::vector<std::regex> cpu_patterns;
    for (const auto& p : st.cpu_tensor_patterns) {
        try {
            cpu_patterns.emplace_back(p);
        } catch (const std::regex_error& e) {
            throw std::runtime_error(fmt::format("-ot pattern '{}' is not a valid regex: {}", p, e.what()));
        }
    }
    const int out_dev = pl.layer_device[s.n_layer];
    std::vector<std::uint64_t> gpu_weight(n_gpu, 0);
    // Host tensors are mmapped: llama.cpp maps the file range from the first to the last CPU tensor of each
    // file.
    struct Range {
        std::uint64_t first = UINT64_MAX, last = 0;
    };
    std::vector<Range> host_range;
    std::uint64_t largest_host_layer_tensor = 0;  // see the compute buffer below
    std::uint64_t host_repack = 0;
    // The device a tensor's weights live on: its GPU's index, -1 for the host; nullopt for one the main
    // context does not load (e.g. MTP layers).
    const auto device_of = [&](const std::string& name) -> std::optional<int> {
        int where = out_dev;  // output.weight, output_norm.weight and any other non-layer tensor
        if (name.starts_with("token_embd.")) {
            where = -1;
        } else if (auto il = layer_of(name)) {
            if (*il >= s.n_layer) return std::nullopt;
            where = pl.layer_device[*il];
            if (where >= 0 && *il < st.n_cpu_moe && is_expert_tensor(name)) where = -1;
        }
        if (where >= 0)
            for (const auto& re : cpu_patterns)
                if (std::regex_search(name, re)) return -1;
        return where;
    };
    // ggml-cuda get_alloc_size: quantized rows padded to MATRIX_ROW_PADDING (512); 128-byte alignment.
    const auto gpu_bytes = [](const gguf::TensorInfo& t) {
        std::uint64_t sz = t.n_bytes();
        const auto& tr = gguf::traits(t.type);
        if (tr.quantized && !t.dims.empty() && t.dims[0] % 512 != 0)
            sz += gguf::bytes_for(t.type, 512 - t.dims[0] % 512).value_or(0);
        return align_up(sz, 128);
    };
    for (const auto& t : model.tensors) {
        const auto placed = device_of(t.name);
        if (!placed) continue;
        const int where = *placed;
        const std::uint64_t bytes = t.n_bytes();
        if (where < 0) {
            if (host_range.size() <= t.file_index) host_range.resize(t.file_index + 1);
            auto& r = host_range[t.file_index];
            r.first = std::min(r.first, t.offset);
            r.last = std::max(r.last, t.offset + bytes);
            if (layer_of(t.name)) largest_host_layer_tensor = std::max(largest_host_layer_tensor, bytes);
            // token_embd feeds GET_ROWS, which the repack buffer does not take; matrix weights do.
            if (st.cpu_repack && st.gpus.empty() && !t.name.starts_with("token_embd.") &&
                repackable(t.type) && t.dims.size() >= 2 && t.dims[1] % 4 == 0)
                host_repack += bytes;
        } else {
            gpu_weight[static_cast<std::size_t>(where)] += gpu_bytes(t);
        }
    }
    // Tied embeddings: the output layer duplicates token_embd; on a GPU that is a real copy.
    if (s.tied_embeddings && out_dev >= 0) {
        if (const auto* te = model.find_tensor("token_embd.weight"))
            gpu_weight[static_cast<std::size_t>(out_dev)] += align_up(te->n_bytes(), 128);
    }
    std::uint64_t host_weights = 0;
    for (const auto& r : host_range)
        if (r.last > r.first) host_weights += r.last - r.first;
    for (std::size_t i = 0; i < n_gpu; ++i)
        dev[i].weights = {gpu_weight[i], Source::formula, fmt::format("{} layers of weights", dev[i].layers)};
    dev[n_gpu].weights = {host_weights, Source::formula, "mmapped file range of the tensors kept on the CPU"};
    dev[n_gpu].repack = {host_repack, Source::formula,
                         "CPU_REPACK copy of repackable CPU weights (their file pages stay resident too)"};

    // ---- KV cache (llama-kv-cache.cpp: on the device of its layer, offload_kqv on)
    std::vector<std::uint64_t> kv(n_gpu + 1, 0);
    for (std::uint32_t il = 0; il < s.n_layer; ++il) {
        int w = pl.layer_device[il];
        kv[w < 0 ? n_gpu : static_cast<std::size_t>(w)] += layer_kv_bytes(s, st, d, il);
    }
    const std::string kv_detail = fmt::format(
        "{} cells x {} stream(s), K {} / V {}{}", d.n_ctx_seq, d.n_stream, gguf::traits(st.type_k).name,
        gguf::traits(st.type_v).name, s.any_swa() ? fmt::format(", SWA layers {} cells", d.n_ctx_swa) : "");
    for (std::size_t i = 0; i <= n_gpu; ++i) dev[i].kv = {kv[i], Source::formula, kv_detail};

    // ---- compute buffers (ggml-backend scheduler, worst-case graph of n_ubatch tokens)
    ComputeInputs ci{s,         d.n_ubatch, d.n_outputs, d.n_ctx_seq, d.n_ctx_swa, d.flash_attn,
                     st.type_k, st.type_v,  d.n_stream};
    ci.embeddings = st.embeddings;
    ci.mean_pooling = st.embeddings && (st.pooling == "mean" || (st.pooling.empty() && s.pooling_mean));
    {
        const auto* out_w = model.find_tensor("output.weight");
        if (!out_w) out_w = model.find_tensor("token_embd.weight");
        ci.output_half = out_w && (out_w->type == gguf::GgmlType::F16 || out_w->type == gguf::GgmlType::BF16);
    }
    const std::uint64_t main_compute =
        compute_buffer_bytes(ci, n_gpu > 0 ? ComputeBackend::gpu : ComputeBackend::cpu);
    // Partial offload: host layers run their large-batch work on the GPU with copies of their weights and
    // KV (compute.hpp, host_layers_on_gpu_bytes). H200, -c 65536 -ngl 20: 345 / 378 / 607 MiB logged for
    // llama-3.1-8b / qwen3-30b-a3b / gemma-3-12b where the full-offload graph alone gives 172 / 147 / 224.
    HostLayerCopies copies;
    copies.weight_bytes = largest_host_layer_tensor;
    for (std::uint32_t il = 0; il < s.n_layer && n_gpu > 0; ++il) {
        if (pl.layer_device[il] >= 0) continue;
        const std::uint64_t kv_il = layer_kv_bytes(s, st, d, il);
        if (kv_il > copies.kv_bytes) {
            copies.kv_bytes = kv_il;
            copies.kv_cells = s.is_swa[il] ? d.n_ctx_swa : d.n_ctx_seq;
        }
    }
    const std::uint64_t host_layers = n_gpu > 0 ? host_layers_on_gpu_bytes(ci, copies) : 0;
    for (std::size_t i = 0; i < n_gpu; ++i) {
        if (dev[i].layers == 0) continue;
        const bool partial = host_layers > main_compute;
        dev[i].compute = {
            std::max(main_compute, host_layers), Source::formula,
            fmt::format("worst-case graph: {} tokens, {} KV cells, flash attention {}{}", d.n_ubatch,
                        d.n_ctx_seq, d.flash_attn ? "on" : "off",
                        partial ? "; host layers' K/V and weights copied for large batches" : "")};
    }
    {
        std::uint64_t host = 0;
        std::string what;
        if (n_gpu == 0) {
            host = compute_buffer_bytes(ci, ComputeBackend::cpu);
            what =
                fmt::format("worst-case graph on the CPU: {} tokens, {} KV cells", d.n_ubatch, d.n_ctx_seq);
        } else {
            // With a GPU the scheduler runs a large batch's host-layer ops on the GPU (op offload: the
            // default, --no-op-offload is refused), so the host's buffer holds the graph's inputs even with
            // layers on the CPU: the H100 logged CUDA_Host compute 18.01 / 20.01 MiB with 8 / 20 CPU layers
            // (bench/gpu-offload-host.sh), where the whole CPU graph would be 143 / 120 MiB. A decode's small
            // batch on the CPU layers fits in it; the measured peak covered it.
            host = host_input_bytes(ci);
            what = "graph inputs and token embeddings staged on the host";
        }
        dev[n_gpu].compute = {host, Source::formula, what};
    }

    // ---- output buffer (llama-context.cpp output_reserve(n_seq_max): logits of n_seq_max rows, f32, on the
    // host)
    // With embeddings every token of a batch is an output (output_reserve(n_outputs_all) at decode): logits
    // and, for embeddings, n_embd floats per row.
    // (Only there: a chat's decode outputs at most one row per slot, whatever the reserve graph assumed.)
    const bool every_token_out = st.embeddings || (!st.pooling.empty() && st.pooling != "none");
    const std::uint64_t out_rows = std::max<std::uint64_t>(
        {st.n_parallel, 1, every_token_out ? d.n_outputs : 1u,
         st.draft && !every_token_out ? verify_outputs(st.n_batch, st.n_parallel, st.draft->n_max) : 1u});
    const std::uint64_t row_floats = std::uint64_t{s.n_vocab} + (st.embeddings ? s.n_embd : 0);
    dev[n_gpu].output = {row_floats * out_rows * 4, Source::formula,
                         st.embeddings
                             ? fmt::format("logits and embeddings: ({} vocab + {} width) x {} row(s) x "
                                           "4 bytes",
                                           s.n_vocab, s.n_embd, out_rows)
                             : fmt::format("logits: {} vocab x {} row(s) x 4 bytes", s.n_vocab, out_rows)};

    // ---- LoRA adapters (plan/lora.hpp): each pair beside the weight it adapts, the adapted products'
    // activations wherever the graph runs layers, and on the host the vector each tensor is read through.
    bool lora_cublas = false;
    if (!st.lora.empty()) {
        std::vector<std::vector<LoraPair>> on(n_gpu + 1);
        std::uint64_t largest_tensor = 0;
        for (const auto& p : st.lora) {
            const int where = device_of(p.base).value_or(-1);
            on[where < 0 ? n_gpu : static_cast<std::size_t>(where)].push_back(p);
            largest_tensor = std::max({largest_tensor, p.a.n_bytes(), p.b.n_bytes()});
            if (where >= 0 && !p.quantized()) lora_cublas = true;
        }
        const std::uint64_t activations = lora_compute_bytes(st.lora, d.n_ubatch, d.n_outputs);
        for (std::size_t i = 0; i <= n_gpu; ++i) {
            const bool host = i == n_gpu;
            std::uint64_t held = 0;
            for (const auto& p : on[i])
                held += host ? align_up(p.a.n_bytes(), 64) + align_up(p.b.n_bytes(), 64)
                             : gpu_bytes(p.a) + gpu_bytes(p.b);
            const bool computes =
                host ? n_gpu == 0 || dev[i].layers > 0 || !on[i].empty() : dev[i].layers > 0;
            const std::uint64_t act = computes ? activations : 0;
            const std::uint64_t pool =
                !host && computes ? lora_gpu_pool_bytes(st.lora, d.n_ubatch, d.n_outputs) : 0;
            const std::uint64_t load = host ? largest_tensor : 0;
            if (held + act + pool + load == 0) continue;
            dev[i].adapters = {
                held + act + pool + load, Source::formula,
                fmt::format(
                    "LoRA: {} pair(s) {} + their products' activations {}{}{}", on[i].size(),
                    human_bytes(held), human_bytes(act),
                    pool ? fmt::format(" + f16 copies in the pool {}", human_bytes(pool)) : std::string(),
                    load ? fmt::format(" + load buffer {}", human_bytes(load)) : std::string())};
        }
    }

    // ---- the draft model (plan/draft.hpp): its own context, as the engine makes it from this one's
    // parameters, planned by the same arithmetic; the process's fixed overheads are counted once (here).
    if (st.draft) {
        const DraftModel& dm = *st.draft;
        if (!dm.model) throw std::runtime_error("the draft model's header was not read");
        const Plan dp = make_plan(*dm.model, draft_context_settings(st, d.n_ctx));
        for (std::size_t i = 0; i <= n_gpu; ++i) {
            const DevicePlan* p = dp.find(dev[i].device);
            const bool host = i == n_gpu;
            const std::uint64_t samplers = host ? draft_sampler_bytes(dp.shape.n_vocab, st.n_parallel) : 0;
            const std::uint64_t bytes = (p ? p->total() : 0) + samplers;
            if (bytes == 0) continue;
            std::string detail =
                fmt::format("draft model '{}': {} layer(s)", dp.model_name, p ? p->layers : 0);
            if (p) {
                for (const auto& [what, f] :
                     {std::pair{"weights", &p->weights}, std::pair{"repack", &p->repack},
                      std::pair{"KV", &p->kv}, std::pair{"compute", &p->compute},
                      std::pair{"outputs", &p->output}, std::pair{"pool", &p->overhead}})
                    if (f->bytes) detail += fmt::format(", {} {}", what, human_bytes(f->bytes));
            }
            if (samplers) detail += fmt::format(", samplers {}", human_bytes(samplers));
            dev[i].draft = {bytes, Source::formula, std::move(detail)};
        }
    }

    // ---- overhead and margin
    // Unquantized matrix weights (f16, bf16, f32) make prompt processing go through cuBLAS GEMMs, whose
    // kernels the driver loads lazily into device memory, with their workspace and f16 copies of the inputs
    // in the pool; with flash attention nothing else has loaded them. H200 (bench/h200-decode-growth.sh,
    // bench/results/h200-2026-12-04-decode-growth.txt): +116 MiB after the first prompt for llama-3.1-8b f16
    // and a 4096-wide f16 model, against +20 for qwen2.5-7b q4_k_m; the 32 MiB below covered only the
    // latter (loch's plan was 73 MiB under the f16 8B).
    // (The large matrices only: a MoE router or a norm in f32 does not do it — qwen3-30b-a3b q8_0 grew by
    // what the 32 MiB covers.)
    const auto big_matrix = [](const std::string& n) {
        for (const char* w : {".attn_q.", ".attn_k.", ".attn_v.", ".attn_output.", ".attn_qkv.", ".ffn_up",
                              ".ffn_down", ".ffn_gate.", ".ffn_gate_exps."})
            if (n.find(w) != std::string::npos) return true;
        return false;
    };
    const bool cublas_gemm =
        d.flash_attn &&
        (lora_cublas || std::any_of(model.tensors.begin(), model.tensors.end(), [&](const auto& t) {
             return t.dims.size() >= 2 && t.name.starts_with("blk.") && big_matrix(t.name) &&
                    !gguf::traits(t.type).quantized;
         }));
    const std::uint64_t growth = runtime_growth_bytes(ci) + (cublas_gemm ? kCublasGemmGrowthBytes : 0);
    for (std::size_t i = 0; i < n_gpu; ++i)
        dev[i].overhead = {st.gpu_overhead_bytes + growth, Source::formula,
                           fmt::format("per-process GPU context (CUDA context, cuBLAS workspace) {} + growth "
                                       "after real prompts {}{}",
                                       human_bytes(st.gpu_overhead_bytes), human_bytes(growth),
                                       cublas_gemm ? " (unquantized weights: cuBLAS GEMMs)" : "")};
    dev[n_gpu].overhead =
        n_gpu > 0
            ? MemoryFigure{st.gpu_engine_host_overhead_bytes, Source::measured,
                           "a GPU engine's process in host RAM outside ggml buffers (its GPU runtime)"}
            : MemoryFigure{st.cpu_overhead_bytes, Source::configured, "engine process outside ggml buffers"};
    for (auto& dp : dev) {
        const double base = static_cast<double>(dp.total());
        dp.margin = {static_cast<std::uint64_t>(std::llround(base * st.margin_fraction)), Source::configured,
                     fmt::format("{:.1f}% margin", st.margin_fraction * 100)};
    }

    if (n_gpu == 0 && st.n_gpu_layers > 0)
        plan.notes.push_back("no GPU given: -ngl has no effect, everything runs on the CPU");
    if (st.flash_attn == FlashAttn::automatic)
        plan.notes.push_back("flash attention 'auto' assumed to resolve to on (CPU and CUDA support it)");
    if (n_gpu > 1)
        plan.notes.push_back(
            "several GPUs: layers split by --tensor-split (default even; llama.cpp splits by free memory)");
    if (host_weights > 0 && n_gpu > 0 && dev[n_gpu].layers > 0)
        plan.notes.push_back("host weights are an mmapped file range: resident only as pages are touched");
    plan.devices = std::move(dev);
    return plan;
}

Settings draft_context_settings(const Settings& target, std::uint32_t target_n_ctx) {
    if (!target.draft) throw std::runtime_error("no draft model in these settings");
    const DraftModel& dm = *target.draft;
    Settings ds = target;
    ds.draft.reset();
    ds.lora.clear();
    ds.embeddings = false;
    ds.pooling.clear();
    ds.cpu_tensor_patterns.clear();
    ds.n_cpu_moe = 0;
    ds.n_ctx = target_n_ctx;
    ds.n_gpu_layers = dm.n_gpu_layers;
    ds.type_k = dm.type_k;
    ds.type_v = dm.type_v;
    ds.n_outputs_max = target.n_parallel;
    ds.gpu_overhead_bytes = 0;
    ds.cpu_overhead_bytes = 0;
    ds.gpu_engine_host_overhead_bytes = 0;
    ds.margin_fraction = 0;
    return ds;
}

std::optional<std::uint32_t> max_context(const gguf::Model& model, Settings st, const std::string& device,
                                         std::uint64_t budget, bool allow_beyond_train) {
    const ModelShape s = shape_of(model);
    if (device != "cpu") {
        st.gpus = {device};
        st.n_gpu_layers = -1;
        st.tensor_split.clear();
    } else {
        st.gpus.clear();
    }
    auto fits = [&](std::uint32_t n_ctx) {
        st.n_ctx = n_ctx;
        Plan p = make_plan(model, st);
        const DevicePlan* dp = p.find(device);
        return dp && dp->total() <= budget;
    };
    std::uint32_t hi = allow_beyond_train || s.n_ctx_train == 0 ? (1u << 24) : pad(s.n_ctx_train, 256);
    if (!fits(256)) return std::nullopt;
    std::uint32_t lo = 256;  // fits
    if (fits(hi)) return hi;
    while (hi - lo > 256) {  // invariant: lo fits, hi does not
        std::uint32_t mid = (lo / 256 + hi / 256) / 2 * 256;
        if (fits(mid))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int max_gpu_layers(const gguf::Model& model, Settings st, std::uint64_t budget) {
    if (st.gpus.empty()) throw std::runtime_error("max_gpu_layers needs a GPU in settings.gpus");
    const ModelShape s = shape_of(model);
    for (int ngl = static_cast<int>(s.n_layer) + 1; ngl > 0; --ngl) {
        st.n_gpu_layers = ngl;
        Plan p = make_plan(model, st);
        if (p.devices.front().total() <= budget) return ngl;
    }
    return 0;
}

void to_json(nlohmann::json& j, const DevicePlan& d) {
    j = {{"device", d.device},     {"layers", d.layers},   {"weights", d.weights},
         {"kv_cache", d.kv},       {"compute", d.compute}, {"output", d.output},
         {"overhead", d.overhead}, {"margin", d.margin},   {"repack", d.repack},
         {"adapters", d.adapters}, {"draft", d.draft},     {"total_bytes", d.total()}};
}

void to_json(nlohmann::json& j, const Plan& p) {
    j = {{"model", p.model_name},
         {"architecture", p.shape.arch},
         {"n_ctx", p.n_ctx},
         {"n_ctx_seq", p.n_ctx_seq},
         {"kv_streams", p.n_stream},
         {"n_ctx_swa", p.n_ctx_swa},
         {"n_parallel", p.settings.n_parallel},
         {"n_ubatch", p.n_ubatch},
         {"flash_attn", p.flash_attn},
         {"cache_type_k", gguf::traits(p.settings.type_k).name},
         {"cache_type_v", gguf::traits(p.settings.type_v).name},
         {"layers_offloaded", p.layers_offloaded},
         {"layers_offloadable", p.layers_offloadable},
         {"devices", p.devices},
         {"gpu_total_bytes", p.gpu_total()},
         {"notes", p.notes}};
}

}  // namespace loch::plan
