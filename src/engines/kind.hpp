// engines/kind — the seam between loch and an engine family. Everything loch knows about one family of
// engine servers (llama-server, sd-server, whisper-server, vLLM, a generic command) lives behind this
// interface, in one file under engines/kinds/, registered in engines/kinds/registry.cpp. The broker and the
// HTTP layer talk to a Kind, never to a flag, endpoint or log line of one.
//
// A kind answers, for one model entry of the config:
//   launch      — the argv (no shell), environment (device visibility included) and readiness rule for a
//                 placement the broker decided;                                                 (required)
//   formula     — what the model needs on each candidate device, without running anything;       (required)
//   estimate    — a better figure that may run something (the engine's dry run);   default: formula()
//   measure     — what the engine really allocated, read from its startup log;     default: nothing
//   after_ready — what the running engine says about itself (slot context …);      default: nothing
//   check_before_start — refuse a request from the config alone, before any engine starts (an image above
//                 max_size, audio over its length, an upload over the model's limits); default: nothing
//   check_request — refuse a request before it is sent, with what the running engine says (prompt tokens
//                 vs slot context);                                                  default: nothing
//   serves      — which API routes it answers.                         default: the OpenAI text routes
//   sleep/wake  — a cheaper eviction than a stop (vLLM's sleep mode): what a sleeping engine still holds
//                 on its device and moved to host RAM;                        default: no sleep (stop)
//   describe_file — what the model's file says about itself (size, architecture, parameters, quantization,
//                 context, embedding or not), for clients that list models;   default: the files' size
//   slot files  — conversations that survive a stop (llama-server's --slot-save-path): how to launch it so,
//                 save its slots to files before a stop, the request's prompt as the engine renders it,
//                 restore a file into a free slot and pin the request there;   default: none (stop loses
//                 them)
//   cpu_threads — how many threads it computes with on the CPU (its setting or its   default: unknown,
//                 own default)                                                        not counted
//   upstream    — the engine's own path for a route, and what its body needs   default: the route, as sent
//                 (whisper-server answers both audio routes on one path, translation as a form field)
// For every optional hook, doing nothing is correct: loch then relies on the formula, the per-process
// measurement of the broker and the engine's own error answers.
//
// Kinds are stateless and const; the registry hands out references that live as long as the program.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "config/kind_schema.hpp"
#include "core/footprint.hpp"
#include "core/memory.hpp"
#include "engines/engine_client.hpp"
#include "engines/image_input.hpp"
#include "engines/spec.hpp"

namespace loch::engines {

// What a kind may use to estimate beyond the config: where to cache, and the executor to run a dry run on.
struct EstimateContext {
    boost::asio::any_io_executor ex;
    std::filesystem::path cache_file;  // empty = no cache on disk
};

// What a ready engine said about itself.
struct ReadyFacts {
    std::optional<std::uint64_t> slot_ctx;      // tokens one request may use (prompt + generated)
    std::string slot_ctx_source;                // "engine /props", "config args.ctx / args.parallel"
    std::optional<std::uint32_t> image_tokens;  // per image, in the slot's context (a vision projector's)
};

// One request as a kind sees it before it is sent (the HTTP layer parsed and validated it).
struct RequestView {
    std::string_view route;                // the API path: "/v1/chat/completions", "/v1/completions", …
    const nlohmann::json* body = nullptr;  // the parsed JSON body
    std::uint64_t prompt_bytes = 0;        // text bytes in the prompt or messages
    std::uint64_t prompt_token_ids = 0;    // token ids given directly
    std::optional<std::uint64_t> max_tokens;
    const config::ModelConfig* model = nullptr;  // the entry it goes to
    const Placement* where = nullptr;            // the device it runs on, once the broker knows it
    std::span<const ImageInput> images;          // inline images (chat's image_url data URLs)
};

// What one request needs on its engine's device while it runs, beyond the engine's own reservation (an
// image's compute buffers for its size). The broker holds it as a request reservation from grant until the
// engine is done with the request.
struct RequestCost {
    std::uint64_t bytes = 0;
    // What the engine keeps of it after the request ends (part of `bytes`): a memory pool that never shrinks
    // (ggml-cuda's), at the size of the largest request so far. The broker adds what exceeds the run's
    // largest so far to the engine's own reservation when the request ends.
    std::uint64_t retained_bytes = 0;
    std::string why;                                    // "compute at 1024x1024: 1.88 GiB (taesd decode)"
    nlohmann::json details = nlohmann::json::object();  // the numbers per component, for a refusal
    // What would make it fit in `budget` bytes (a smaller size, tiling, flash attention …), for the refusal.
    std::function<std::vector<std::string>(std::uint64_t budget)> would_help;
    // What the engine will do differently from what was asked, told to the client (X-Loch-Notice) rather
    // than done silently: "250x250 is generated as 256x256 (…)".
    std::string notice;
    // Its largest single tensor on the device and what it is: a backend that caps one allocation (Vulkan:
    // maxMemoryAllocationSize, 4 GiB on RADV) fails above it however much memory is free. 0: not known.
    std::uint64_t largest_tensor = 0;
    std::string largest_tensor_why;  // "decoder: the im2col of a 256-channel 3x3 convolution …"
    // The option changes that bring the largest tensor under `limit` bytes, for the refusal.
    std::function<std::vector<std::string>(std::uint64_t limit)> under_allocation;
    // What it also takes in the host's RAM while it runs, when the engine is on a discrete device (phases
    // the flags run on the CPU: sd.vae_on_cpu's decoder, clip_on_cpu's text encoders): booked on `cpu`.
    std::uint64_t host_bytes = 0;
    std::string host_why;
};

// What a sleeping engine holds (Kind::asleep): on its device (CUDA context, graphs) and in host RAM (level
// 1: its weights, moved there).
struct SleepFootprint {
    std::uint64_t device_bytes = 0;
    std::uint64_t host_bytes = 0;
    std::string why;
};

// One slot an engine saved to a file before it was stopped (Kind::save_slots).
struct SavedSlot {
    std::string file;          // the file's name in the folder the engine was launched with
    std::string prompt;        // what the slot held, as text the way prompt_text renders a request
    std::uint64_t tokens = 0;  // tokens in the slot (prompt and generated)
    std::uint64_t bytes = 0;   // the file's size
    double ms = 0;             // how long the engine took to write it
};

// A saved slot restored into a running engine (Kind::restore_slot).
struct RestoredSlot {
    int slot = 0;
    std::uint64_t tokens = 0;
    double ms = 0;
};

// Why a kind refuses a request (the HTTP layer renders it: status, type, message, details).
struct Refusal {
    enum class Kind { context_length_exceeded, invalid_request, too_large } kind = Kind::invalid_request;
    std::string message;
    nlohmann::json details = nlohmann::json::object();
};

// A kind is also its config schema (config/kind_schema.hpp): name(), its own keys of a model entry and
// their checks, the program it runs.
class Kind : public config::KindSchema {
  public:
    // The launch for `where` on `port`. Throws std::invalid_argument when the entry cannot be launched.
    virtual EngineSpec launch(const config::Config& cfg, const config::ModelConfig& model,
                              const Placement& where, std::uint16_t port) const = 0;

    // One Need per candidate device (same order), the device's configured margin included.
    virtual Footprint formula(const config::Config& cfg, const config::ModelConfig& model,
                              const std::vector<Placement>& devices) const = 0;
    virtual boost::asio::awaitable<Footprint> estimate(const EstimateContext& ctx, const config::Config& cfg,
                                                       const config::ModelConfig& model,
                                                       const std::vector<Placement>& devices) const;
    // What estimate() itself holds on a GPU while it runs (the broker books it for that time).
    virtual std::uint64_t estimate_gpu_bytes() const { return 0; }
    // The configured limits of `model` that can never run on `where` even with the device to itself
    // (`capacity`: what it can ever give): one line each, naming the largest value that fits. The broker
    // says them at start, per model, when no allowed device can run them (issue 51: a max_size that needed
    // 84 GiB beside the weights under a 72 GiB budget was found only when a request tried).
    virtual std::vector<std::string> limits_that_never_fit(const config::Config& /*cfg*/,
                                                           const config::ModelConfig& /*model*/,
                                                           const Placement& /*where*/,
                                                           std::uint64_t /*capacity*/) const {
        return {};
    }
    // The model split over the devices of `where` (where.split(), in its shares): one Need per device, the
    // main one first, each device's margin included. Empty: this kind does not split a model (doing nothing
    // is correct).
    virtual std::vector<Need> split_formula(const config::Config& cfg, const config::ModelConfig& model,
                                            const Placement& where) const;

    // The engine's own account of what it allocated on `where`, from the output between spawn and ready.
    // For a split, on its main device; measure_split gives every device's.
    virtual std::optional<MemoryFigure> measure(const std::vector<std::string>& startup_log,
                                                const Placement& where) const;
    // Per device of a split, main first (nullopt where the output says nothing). The default: the main
    // device's measure() alone.
    virtual std::vector<std::optional<MemoryFigure>> measure_split(
        const std::vector<std::string>& startup_log, const Placement& where) const;
    virtual boost::asio::awaitable<ReadyFacts> after_ready(boost::asio::any_io_executor ex,
                                                           const EngineAddress& engine,
                                                           const config::ModelConfig& model) const;
    // The slot context the config alone implies, before any engine ran (for "max_tokens can never fit").
    virtual std::optional<std::uint64_t> configured_slot_ctx(const config::ModelConfig& model) const;
    // How a slot of `needed` tokens could be had, for the refusal of a request that needs it: the setting to
    // raise and its value, or why the model cannot give it. Default: the model's context setting.
    virtual std::string context_advice(const config::ModelConfig& model, std::uint64_t needed) const;
    // Requests the engine may take at once (the broker's slots): `concurrency`, else the kind's own (at
    // least 1).
    virtual std::uint32_t slots(const config::ModelConfig& model) const;

    virtual std::optional<Refusal> check_before_start(const config::ModelConfig& model,
                                                      const RequestView& request) const;
    virtual boost::asio::awaitable<std::optional<Refusal>> check_request(boost::asio::any_io_executor ex,
                                                                         const EngineAddress& engine,
                                                                         const ReadyFacts& facts,
                                                                         const RequestView& request) const;
    // Whether it answers this API path (default: /v1/chat/completions, /v1/completions, /v1/embeddings).
    virtual bool serves(const config::ModelConfig& model, std::string_view route) const;
    // The largest upload a request to this model may carry (whisper.max_upload): the HTTP server's body limit
    // is raised to it for the upload routes. Default: none beyond the server's max_body.
    virtual std::optional<std::uint64_t> max_upload(const config::ModelConfig&) const { return std::nullopt; }
    // Sleep instead of a stop when evicted: the level the model's config enables (0: none, stop it).
    virtual std::uint32_t sleep_level(const config::ModelConfig& model) const;
    virtual SleepFootprint asleep(const config::ModelConfig& model, const Need& awake) const;
    // Asks the engine to sleep / wake; false when it did not (the broker then stops it).
    virtual boost::asio::awaitable<bool> sleep(boost::asio::any_io_executor ex, const EngineAddress& engine,
                                               std::uint32_t level) const;
    virtual boost::asio::awaitable<bool> wake(boost::asio::any_io_executor ex, const EngineAddress& engine,
                                              std::uint32_t level) const;
    // The threads the engine computes with on the CPU (of `cores` cores) when it runs at `where`: on the CPU
    // its setting, else its own default; on a GPU only where its settings keep work on the CPU (llama.cpp's
    // layers or experts left there, sd's text encoders or decoder placed there). `layers`: the model's
    // repeating layers, 0 when unknown. nullopt = none, or unknown (a command engine): not counted. Engines
    // compute on the CPU side by side only while their threads fit in its cores (docs/broker.md).
    virtual std::optional<std::uint32_t> cpu_threads(const config::ModelConfig&, const Placement& /*where*/,
                                                     std::uint32_t /*cores*/,
                                                     std::uint32_t /*layers*/) const {
        return std::nullopt;
    }
    // Slot files. Whether this kind can save and restore this model's slots (false: none of the calls
    // below is made), and the launch changed so that the engine keeps them in `folder` (which exists).
    virtual bool keeps_slot_files(const config::ModelConfig&) const { return false; }
    virtual void launch_with_slot_files(const std::filesystem::path& /*folder*/, EngineSpec& /*spec*/) const {
    }
    // Saves every idle slot holding at least `min_tokens` as "<prefix>-<slot>.bin", each save given at most
    // `limit` (one not done by then is abandoned): what was saved.
    virtual boost::asio::awaitable<std::vector<SavedSlot>> save_slots(boost::asio::any_io_executor ex,
                                                                      const EngineAddress& engine,
                                                                      std::string prefix,
                                                                      std::uint64_t min_tokens,
                                                                      std::chrono::seconds limit) const;
    // A short text a saved slot's text must contain for the request to continue it (found without asking
    // the engine; empty: the request cannot continue one).
    virtual std::string prompt_probe(const RequestView&) const { return {}; }
    // The request's prompt as text, rendered the way save_slots records a slot's (nullopt: this route or
    // body cannot be rendered; no restore is tried).
    virtual boost::asio::awaitable<std::optional<std::string>> prompt_text(boost::asio::any_io_executor ex,
                                                                           const EngineAddress& engine,
                                                                           const RequestView& request) const;
    // Restores `file` into the idle slot holding the least: which one, or nullopt (nothing restored). (Two
    // restores at once may pick the same slot; the engine then re-reads what the second one lost.)
    virtual boost::asio::awaitable<std::optional<RestoredSlot>> restore_slot(boost::asio::any_io_executor ex,
                                                                             const EngineAddress& engine,
                                                                             std::string file) const;
    // `body` (the client's JSON) sent to `slot`, where the restored conversation is.
    virtual void pin_to_slot(std::string& /*body*/, int /*slot*/) const {}
    // The engine's path for an API route; `body` (the client's, with its Content-Type) may be changed for it.
    virtual std::string upstream(std::string_view route, std::string_view content_type,
                                 std::string& body) const;
    // The request's own memory on the engine's device (default: none — text requests live in the engine's
    // reserved KV cache).
    virtual std::optional<RequestCost> request_cost(const config::ModelConfig& model,
                                                    const RequestView& request) const;
    // A running request's progress read from the engine's last log lines: {step, steps, seconds_per_step,
    // eta_s} (sd-server prints its sampling steps). Only asked when reports_progress().
    virtual bool reports_progress() const { return false; }
    virtual std::optional<nlohmann::json> request_progress(const std::vector<std::string>& log_tail) const;
    // Whether the engine stops a request whose client hung up (its connection closed). An engine that cannot
    // (sd-server) keeps the request's slot and reservation until it has finished.
    virtual bool cancels_on_disconnect() const { return true; }
    // Whether its answers carry the configured model name (else the HTTP layer rewrites their "model").
    virtual bool names_model_as_configured() const { return true; }
    // An error answer of the engine that a config change fixes, as the loch.yaml fix (e.g. llama-server's
    // "Start it with --embeddings" → the model entry's args). Default: nothing; the engine's answer passes.
    virtual std::optional<Refusal> explain_error(const config::ModelConfig& model, std::string_view route,
                                                 unsigned status, std::string_view body) const;
};

// The registry (engines/kinds/registry.cpp): the kind of a model entry, or by name. Throws
// std::out_of_range for a name no kind has.
const Kind& kind_of(const config::ModelConfig& model);  // an empty `engine` is the default kind
const Kind& kind_named(std::string_view name);
std::vector<std::string_view> kind_names();  // the default kind first
// For the config loader (LoadContext::kinds): every kind's schema, the default first.
std::vector<const config::KindSchema*> kind_schemas();

}  // namespace loch::engines
