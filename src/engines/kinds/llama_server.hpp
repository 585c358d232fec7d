// engines/kinds/llama_server — the pinned llama.cpp server as an engine kind: everything loch knows about
// llama-server's flags, endpoints and log lines is here (and the arithmetic in plan/).
//
//   <binary> -m <path> --host 127.0.0.1 --port <p> -c <ctx> -np <parallel> -ngl <n> -fa <on|off|auto>
//            [-ctk t] [-ctv t] [-ub n] [-b n] [-t n] [--mmproj <projector>] [--lora <adapter> |
//            --lora-scaled <adapter>:<scale> …] [--spec-type draft-simple --spec-draft-model <draft>
//            --spec-draft-n-max n --spec-draft-ngl n] --device <d> --alias <name>
//            --fit off -lv 4 --no-webui --cache-ram <MiB> [--no-warmup: without a projector] <extra…>
//
// `--fit off`: loch decides placement; an engine left to fit itself silently takes the whole card
// (docs/engines.md, ../shared reference). `-lv 4`: this llama.cpp prints buffer sizes (model / KV /
// compute per device) only at verbosity 4, and measure() reads them. The secret goes in LLAMA_API_KEY.
//
// Footprint (llama_server_footprint.cpp) by THE reservation rule (docs/plan.md): per device, the largest of
// loch's planner (plan/plan.hpp; Source::formula) and the engine's own dry run (`llama-fit-params` next to
// the server binary, with the engine's flags; Source::engine_dry_run) plus what a dry run leaves out (on a
// GPU the per-process overhead; on the CPU the mapped weights, their repacked copy and the process
// overhead), plus the device's configured margin. The dry run is an async child process, cached in the
// EstimateContext's cache file, keyed by the model file (path, size, mtime), the exact argv and the binary.
//
// After ready: GET /props gives the slot context (the engine may cap ctx at the model's training context).
// Before a request: a byte bound on the prompt, and only above it the exact count by the engine's own
// chat template and tokenizer (/apply-template, /tokenize).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "engines/kind.hpp"
#include "plan/plan.hpp"
#include "plan/projector.hpp"

namespace loch::engines {

// -ngl when neither the config nor the placement says: everything on the GPU.
inline constexpr int kAllLayers = 999;

enum class FlashAttn { on, off, auto_ };
std::string_view to_string(FlashAttn f);  // "on" | "off" | "auto" (llama-server's -fa values)

// The model entry's `args:` (docs/config.md). Unset optionals mean "not passed: the engine's default".
// args.ctx_extension: what a context above the model's training context is made of. llama-server caps
// every slot at the training context unless YaRN scaling stretches it (its n_ctx_slot()), so without an
// extension such a ctx is refused at config time instead of booking KV the engine never uses.
enum class CtxExtension { none, yarn };

struct LlamaArgs final : config::KindSettings {
    std::uint32_t ctx = 4096;  // -c: context per engine (split over `parallel` slots)
    // `ctx: auto`: each slot gets the model's training context, at most kAutoSlotCtx (set by the config
    // check from the file; 4096 per slot while no file was read).
    bool ctx_auto = false;
    static constexpr std::uint32_t kAutoSlotCtx = 32768;
    CtxExtension ctx_extension = CtxExtension::none;
    std::uint32_t parallel = 1;               // -np: slots (concurrent requests in one engine)
    std::optional<int> n_gpu_layers;          // -ngl: unset = all on the GPU the placement chose
    FlashAttn flash_attn = FlashAttn::auto_;  // -fa
    std::optional<std::string> cache_type_k;  // -ctk: f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1
    std::optional<std::string> cache_type_v;  // -ctv
    std::optional<std::uint32_t> ubatch;      // -ub
    std::optional<std::uint32_t> batch;       // -b
    std::optional<std::uint32_t> threads;     // -t
    // --cache-ram: llama-server's prompt cache in host RAM (slot states kept when a slot takes another
    // conversation). The engine's default is 8 GiB that nobody books; loch passes 0 (off) unless set, and
    // books what is set on the device when the host's memory is the device's (the CPU, an APU).
    std::uint64_t cache_ram = 0;
    // --mmproj: a vision projector (llama.cpp's mmproj GGUF) for image input; "~/" expanded, a relative path
    // is beside the model file. Planned by plan/projector.hpp (fixed-resolution projectors only).
    std::filesystem::path mmproj;
    // The projector's plan, read by the config check from the file (never on the request path).
    std::optional<plan::ProjectorPlan> projector;
    // --lora / --lora-scaled: LoRA adapters applied to every request at `scale` (llama.cpp's default 1);
    // paths as for mmproj. Planned by plan/lora.hpp from the pairs the config check read and checked against
    // the model (what llama.cpp's loader would refuse is refused there, with its reason).
    struct Lora {
        std::filesystem::path path;
        float scale = 1.0f;
    };
    std::vector<Lora> lora;
    std::shared_ptr<const std::vector<plan::LoraPair>> lora_pairs;
    // --spec-type draft-simple --spec-draft-model: speculative decoding with a draft model, `max` tokens
    // drafted per slot per step (--spec-draft-n-max); path as for mmproj. Its layers go where the model's
    // do; its KV cache is f16 (the engine's default). Planned by plan/draft.hpp; the config check refuses
    // what the engine would (another speculative type, another vocabulary) and keeps the draft's header.
    struct Draft {
        std::filesystem::path path;
        std::uint32_t max = plan::kDraftMaxDefault;
    };
    std::optional<Draft> draft;
    std::shared_ptr<const gguf::Model> draft_file;
    // The model file's header as the config check read it (gguf::for_planning): what the footprint and a
    // split are planned from, without reading the file again on loch's loop.
    std::shared_ptr<const gguf::Model> file;
    std::vector<std::string> extra;  // appended verbatim as separate argv entries (never a shell)

    std::uint32_t slot_ctx() const { return parallel == 0 ? ctx : ctx / parallel; }
    // The longest slot context the engine gives this model: its training context, times the YaRN factor
    // of args.ctx_extension or of RoPE flags in `extra`. nullopt: no file was read.
    std::optional<std::uint32_t> slot_ctx_limit() const;
    // The YaRN flags the launch adds: a factor over the training context just large enough for slot_ctx()
    // (none when it fits, or without args.ctx_extension: yarn).
    std::vector<std::string> yarn_flags() const;
    std::unique_ptr<config::KindSettings> clone() const override {
        return std::make_unique<LlamaArgs>(*this);
    }
};
const LlamaArgs& llama_args(const config::ModelConfig& model);
// What args.cache_ram takes on the device `where` (the host's memory: the CPU or an APU), else 0.
std::uint64_t prompt_cache_bytes(const config::ModelConfig& model, const Placement& where);

// args.mmproj as the engine opens it; empty without one.
std::filesystem::path mmproj_path(const config::ModelConfig& model);
// args.lora's files as the engine opens them, in order.
std::vector<std::filesystem::path> lora_paths(const config::ModelConfig& model);
// args.draft's model file as the engine opens it; empty without one.
std::filesystem::path draft_path(const config::ModelConfig& model);
// The draft for the planner: its header as the config check read it, else read now. nullopt without one;
// throws what gguf::read_model throws.
std::optional<plan::DraftModel> draft_model(const config::ModelConfig& model);
// Every pair of args.lora's adapters: as the config check read them, else read now (entries whose files were
// not checked). Throws std::runtime_error naming the file and what llama.cpp would refuse.
std::vector<plan::LoraPair> lora_pairs(const config::ModelConfig& model);
// The model file's header for the planner: as the config check read it, else read now (entries whose files
// were not checked). Throws what gguf::read_model throws.
std::shared_ptr<const gguf::Model> planned_file(const config::ModelConfig& model);
// The projector's plan (weights, compute, tokens per image) as the config check read it; nullopt without
// one or when it could not be read (the check has said why).
std::optional<plan::ProjectorPlan> projector_plan(const config::ModelConfig& model);

// How llama.cpp inside the engine names the devices of `where`, the main one first. The kind shows the engine
// only those devices (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES in this order), so that CUDA and ROCm
// devices are 0, 1, … inside whatever their ordinals: "CUDA0", "CUDA1"; "ROCm0"; Vulkan devices are not
// hidden by those variables and keep their ordinal ("Vulkan1"); the CPU is "none".
std::vector<std::string> llama_devices(const Placement& where);
std::string llama_device(const Placement& where);  // the main one

std::vector<std::string> llama_server_argv(const std::filesystem::path& binary,
                                           const config::ModelConfig& model, const Placement& where,
                                           std::uint16_t port);

// llama-server's settings for `model` on `where`, as the planner takes them.
plan::Settings llama_plan_settings(const config::ModelConfig& model, const Placement& where);

// What args.extra changes in the engine's memory. Every flag of the pinned llama-server is classified in
// engines/flags (planned, memory-neutral, refused, set by loch); extra takes the planned and the neutral
// ones, and the planned ones land here: --kv-unified, --swa-full, --no-repack, --cpu-moe, --n-cpu-moe,
// --override-tensor PATTERN=CPU, --embedding, --pooling, --rerank. Anything else — a flag refused, set by
// loch, or unknown — is refused at config time with the reason.
struct ExtraPlanFlags {
    bool kv_unified = false;
    bool swa_full = false;
    bool no_repack = false;
    bool cpu_moe = false;
    std::uint32_t n_cpu_moe = 0;
    std::vector<std::string> cpu_tensor_patterns;
    bool embedding = false;  // --embedding (--rerank implies it)
    std::string pooling;     // --pooling none|mean|cls|last|rank ("" = the model's own)
};
// nullopt and `out` filled, or the refusal's text.
std::optional<std::string> read_extra_plan_flags(const std::vector<std::string>& extra, ExtraPlanFlags& out);

// A content part's or block's "type", "" when it has none or it is not a string (a client's body: never a
// throw).
std::string type_of(const nlohmann::json& part);

// The chat-completions messages the engine renders for a request on `route`: the chat body's own; an
// Anthropic Messages body's `system` and messages, a Responses body's `instructions` and `input`, as the
// pinned llama-server converts them (tools/server/server-chat.cpp) — text only. nullopt for anything the
// conversion here does not model (tool calls and results, images, reasoning): its callers then skip what
// they would have used the rendering for (a slot restore, an exact context check), never guess.
std::optional<nlohmann::json> chat_messages_of(std::string_view route, const nlohmann::json& body);

// A chat body's prompt as the engine renders it (its chat template, POST /apply-template), image parts
// left out; nullopt when the engine did not answer.
boost::asio::awaitable<std::optional<std::string>> templated_prompt(boost::asio::any_io_executor ex,
                                                                    const EngineAddress& engine,
                                                                    const nlohmann::json& body);

class LlamaServerKind final : public Kind {
  public:
    std::string_view name() const override { return "llama-server"; }
    // Config (llama_server_config.cpp): `args:`; a GGUF file at `path`; the per-slot context ≥ 16.
    std::unique_ptr<config::KindSettings> initial_settings() const override {
        return std::make_unique<LlamaArgs>();
    }
    config::Walker::Keys keys(config::Walker& w, config::KindSettings& into) const override;
    void check(config::Walker& w, const YAML::Node& entry, const std::string& path,
               config::ModelConfig& model, bool check_files) const override;
    std::string program() const override { return "llama-server"; }
    std::string how_to_get() const override { return "bash scripts/setup.sh builds it"; }
    bool needs_path() const override { return true; }
    std::uint32_t slots(const config::ModelConfig& model) const override;

    EngineSpec launch(const config::Config& cfg, const config::ModelConfig& model, const Placement& where,
                      std::uint16_t port) const override;
    Footprint formula(const config::Config& cfg, const config::ModelConfig& model,
                      const std::vector<Placement>& devices) const override;
    boost::asio::awaitable<Footprint> estimate(const EstimateContext& ctx, const config::Config& cfg,
                                               const config::ModelConfig& model,
                                               const std::vector<Placement>& devices) const override;
    // What one llama-fit-params run holds on a GPU while it sizes a model (H200: ~518 MiB), rounded up.
    std::uint64_t estimate_gpu_bytes() const override { return 640 * kMiB; }
    std::vector<std::string> limits_that_never_fit(const config::Config& cfg,
                                                   const config::ModelConfig& model, const Placement& where,
                                                   std::uint64_t capacity) const override;
    // --split-mode layer: weights by layer range in the placement's shares, KV with its layers, the
    // worst-case compute graph on every device that holds layers (the planner's per-device figures).
    std::vector<Need> split_formula(const config::Config& cfg, const config::ModelConfig& model,
                                    const Placement& where) const override;
    std::optional<MemoryFigure> measure(const std::vector<std::string>& startup_log,
                                        const Placement& where) const override;
    std::vector<std::optional<MemoryFigure>> measure_split(const std::vector<std::string>& startup_log,
                                                           const Placement& where) const override;
    boost::asio::awaitable<ReadyFacts> after_ready(boost::asio::any_io_executor ex,
                                                   const EngineAddress& engine,
                                                   const config::ModelConfig& model) const override;
    std::optional<std::uint64_t> configured_slot_ctx(const config::ModelConfig& model) const override;
    // args.ctx for `needed` tokens per slot (× parallel, in 256s), or, above what the model gives, its
    // training context and args.ctx_extension.
    std::string context_advice(const config::ModelConfig& model, std::uint64_t needed) const override;
    // Images (chat's data URLs): refused before anything starts for a model without a projector; on the CPU
    // costed by their size (decoded in host memory); in the slot's context, the projector's tokens each.
    std::optional<Refusal> check_before_start(const config::ModelConfig& model,
                                              const RequestView& request) const override;
    std::optional<RequestCost> request_cost(const config::ModelConfig& model,
                                            const RequestView& request) const override;
    boost::asio::awaitable<std::optional<Refusal>> check_request(boost::asio::any_io_executor ex,
                                                                 const EngineAddress& engine,
                                                                 const ReadyFacts& facts,
                                                                 const RequestView& request) const override;
    // Slot files (llama_server_slots.cpp): --slot-save-path, GET /slots, POST /slots/{id}?action=….
    bool keeps_slot_files(const config::ModelConfig& model) const override;
    // -t, else llama.cpp's default: the physical cores (counted as every core the broker may use).
    std::optional<std::uint32_t> cpu_threads(const config::ModelConfig& model, const Placement& where,
                                             std::uint32_t cores, std::uint32_t layers) const override;
    void launch_with_slot_files(const std::filesystem::path& folder, EngineSpec& spec) const override;
    boost::asio::awaitable<std::vector<SavedSlot>> save_slots(boost::asio::any_io_executor ex,
                                                              const EngineAddress& engine, std::string prefix,
                                                              std::uint64_t min_tokens,
                                                              std::chrono::seconds limit) const override;
    boost::asio::awaitable<std::optional<std::string>> prompt_text(boost::asio::any_io_executor ex,
                                                                   const EngineAddress& engine,
                                                                   const RequestView& request) const override;
    boost::asio::awaitable<std::optional<RestoredSlot>> restore_slot(boost::asio::any_io_executor ex,
                                                                     const EngineAddress& engine,
                                                                     std::string file) const override;
    std::string prompt_probe(const RequestView& request) const override;
    void pin_to_slot(std::string& body, int slot) const override;
    // "… does not support embeddings. Start it with `--embeddings`" → the model's `args: {extra: […]}`.
    std::optional<Refusal> explain_error(const config::ModelConfig& model, std::string_view route,
                                         unsigned status, std::string_view body) const override;
    // From the GGUF header (gguf::summarize): architecture, parameters, file type, trained context; an
    // embedding model by its pooling type, its architecture (BERT family) or its args (--embeddings).
    nlohmann::json describe_file(const config::ModelConfig& model) const override;
};

}  // namespace loch::engines
