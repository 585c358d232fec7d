// The llama-server kind: launch, what it reports after ready, and the per-request context check.
#include "engines/kinds/llama_server.hpp"

#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "plan/engine_log.hpp"

namespace loch::engines {

namespace asio = boost::asio;
using namespace std::chrono_literals;

std::vector<std::string> llama_devices(const Placement& where) {
    std::vector<std::string> out;
    const auto all = where.all();
    for (std::size_t i = 0; i < all.size(); ++i) {
        const std::string local = std::to_string(i);  // its place among the visible devices
        if (where.backend == "cuda")
            out.push_back("CUDA" + local);
        else if (where.backend == "rocm")
            out.push_back("ROCm" + local);
        else if (where.backend == "vulkan")  // its place among GGML_VK_VISIBLE_DEVICES (engines/spec.cpp)
            out.push_back("Vulkan" + local);
        else
            out.push_back("none");
    }
    return out;
}

std::string llama_device(const Placement& where) {
    return llama_devices(where).front();
}

std::uint64_t prompt_cache_bytes(const config::ModelConfig& model, const Placement& where) {
    return where.backend == "cpu" || where.unified ? llama_args(model).cache_ram : 0;
}

std::vector<std::string> llama_server_argv(const std::filesystem::path& binary,
                                           const config::ModelConfig& model, const Placement& where,
                                           std::uint16_t port) {
    const auto& a = llama_args(model);
    std::vector<std::string> argv{binary.string(),       "-m",     model.path.string(),       "--host",
                                  "127.0.0.1",           "--port", std::to_string(port),      "-c",
                                  std::to_string(a.ctx), "-np",    std::to_string(a.parallel)};
    // A context above the training context, stretched as args.ctx_extension asks (the config check refused
    // one without it): otherwise the engine caps every slot at the training context.
    const auto yarn = a.yarn_flags();
    argv.insert(argv.end(), yarn.begin(), yarn.end());
    const int ngl = where.backend == "cpu" ? 0 : a.n_gpu_layers.value_or(kAllLayers);
    argv.insert(argv.end(), {"-ngl", std::to_string(ngl)});
    argv.insert(argv.end(), {"-fa", std::string(to_string(a.flash_attn))});
    if (a.cache_type_k) argv.insert(argv.end(), {"-ctk", *a.cache_type_k});
    if (a.cache_type_v) argv.insert(argv.end(), {"-ctv", *a.cache_type_v});
    if (a.ubatch) argv.insert(argv.end(), {"-ub", std::to_string(*a.ubatch)});
    if (a.batch) argv.insert(argv.end(), {"-b", std::to_string(*a.batch)});
    if (a.threads) argv.insert(argv.end(), {"-t", std::to_string(*a.threads)});
    // The projector goes where the engine's main device is: clip.cpp takes the first GPU the engine sees
    // (the placement's main one, by the visible-devices order), the CPU when it sees none.
    if (const auto mm = mmproj_path(model); !mm.empty()) argv.insert(argv.end(), {"--mmproj", mm.string()});
    // Adapters go beside the weights they adapt (plan/lora.hpp). The config check refused paths these
    // flags' lists would split (',' always, ':' with a scale).
    const auto loras = lora_paths(model);
    for (std::size_t i = 0; i < loras.size(); ++i) {
        const float scale = a.lora[i].scale;
        if (scale == 1.0f)
            argv.insert(argv.end(), {"--lora", loras[i].string()});
        else
            argv.insert(argv.end(), {"--lora-scaled", fmt::format("{}:{}", loras[i].string(), scale)});
    }
    // The draft runs where the model does: on the same devices (the engine's default), every layer on the
    // GPU unless the placement is the CPU (plan/draft.hpp plans exactly that).
    if (const auto draft = draft_path(model); !draft.empty())
        argv.insert(argv.end(), {"--spec-type", "draft-simple", "--spec-draft-model", draft.string(),
                                 "--spec-draft-n-max", std::to_string(a.draft->max), "--spec-draft-ngl",
                                 std::to_string(where.backend == "cpu" ? 0 : kAllLayers)});
    std::string devices;
    for (const auto& d : llama_devices(where)) devices += (devices.empty() ? "" : ",") + d;
    argv.insert(argv.end(), {"--device", devices});
    if (where.split()) {
        // Layers in ranges over the devices, in loch's shares (not llama.cpp's default by free memory, so
        // that the plan and the reservations are the ones admission decided).
        std::string shares;
        for (float f : where.shares) shares += (shares.empty() ? "" : ",") + fmt::format("{}", f);
        argv.insert(argv.end(), {"--split-mode", "layer", "--tensor-split", shares, "--main-gpu", "0"});
    }
    // Answers name the model as clients know it, not its file path (llama-server's default).
    argv.insert(argv.end(), {"--alias", model.name});
    // loch decides placement; buffer sizes are printed only at verbosity 4; the web UI is not loch's.
    argv.insert(argv.end(), {"--fit", "off", "-lv", "4", "--no-webui"});
    // No warm-up: it decodes BOS+EOS once to page the weights in and start the backend's kernels — work the
    // first request does anyway (a swap's request → first token is ~10 % shorter without it, on a CPU:
    // docs/performance.md); the compute buffers are reserved when the context is made, before it, so the
    // memory the log reports at ready is the same. Kept with a projector: its warm-up reserves the vision
    // encoder's compute buffer at load instead of at the first image. `args.extra: [--warmup]` brings it
    // back.
    if (mmproj_path(model).empty()) argv.push_back("--no-warmup");
    // The prompt cache: off unless args.cache_ram books it (llama_server.hpp says why).
    argv.insert(argv.end(), {"--cache-ram", std::to_string((a.cache_ram + (1 << 20) - 1) >> 20)});
    argv.insert(argv.end(), a.extra.begin(), a.extra.end());
    return argv;
}

EngineSpec LlamaServerKind::launch(const config::Config& cfg, const config::ModelConfig& model,
                                   const Placement& where, std::uint16_t port) const {
    // The build that reaches the placement's backend: a CPU build asked for `--device CUDA0` exits.
    const auto program = cfg.program(name(), where.backend);
    if (program.empty())
        throw std::invalid_argument("no llama-server build for " + where.backend + " (" + where.device +
                                    "): scripts/setup.sh --backend " + where.backend + " builds one");
    EngineSpec s = base_spec(cfg, model, port);
    s.kind = std::string(name());
    s.argv = llama_server_argv(program, model, where, port);
    s.health_path = "/health";
    // Only its own devices are visible (none for the CPU): it cannot open a context on another engine's GPU.
    s.env = device_environment(where, true);
    s.env["LLAMA_API_KEY"] = s.api_key;
    return s;
}

std::optional<MemoryFigure> LlamaServerKind::measure(const std::vector<std::string>& startup_log,
                                                     const Placement& where) const {
    return measure_split(startup_log, where).front();
}

std::vector<std::optional<MemoryFigure>> LlamaServerKind::measure_split(
    const std::vector<std::string>& startup_log, const Placement& where) const {
    const auto names = llama_devices(where);
    std::vector<std::optional<MemoryFigure>> out(names.size());
    std::string text;
    for (const auto& line : startup_log) text += line + "\n";
    const auto fp = plan::parse_engine_log(text);
    if (!fp.any()) return out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        auto fig =
            fp.device_total(where.backend == "cpu" ? std::string("cpu") : plan::device_of_buffer(names[i]));
        if (fig.bytes > 0) out[i] = fig;
    }
    return out;
}

std::optional<std::uint64_t> LlamaServerKind::configured_slot_ctx(const config::ModelConfig& model) const {
    if (llama_args(model).ctx == 0) return std::nullopt;
    return llama_args(model).slot_ctx();
}

std::string LlamaServerKind::context_advice(const config::ModelConfig& model, std::uint64_t needed) const {
    const auto& a = llama_args(model);
    const std::uint64_t ctx = (needed * a.parallel + 255) / 256 * 256;
    const auto limit = a.slot_ctx_limit();
    if (!limit || needed <= *limit)
        return fmt::format("raise args.ctx of model '{}' to {} ({} slot(s) of {} tokens)", model.name, ctx,
                           a.parallel, ctx / a.parallel);
    return fmt::format(
        "model '{}' gives a slot at most {} tokens (its training context{}): a larger one needs args.ctx "
        "{} with args.ctx_extension: yarn (YaRN RoPE scaling; answers may degrade), or a model trained for "
        "longer",
        model.name, *limit, a.ctx_extension == CtxExtension::yarn ? ", stretched" : "", ctx);
}

asio::awaitable<ReadyFacts> LlamaServerKind::after_ready(asio::any_io_executor ex,
                                                         const EngineAddress& engine,
                                                         const config::ModelConfig& model) const {
    // The slot context decides the 400 for prompt + max_tokens: ask the engine (it may cap ctx at the
    // model's training context, or not split it over slots).
    ReadyFacts f;
    auto reply = co_await engine_request(ex, engine, "GET", "/props", "", 5000ms);
    auto j = nlohmann::json::parse(reply.body, nullptr, false);
    if (reply.status == 200 && j.is_object() && j.contains("default_generation_settings") &&
        j["default_generation_settings"].is_object() && j["default_generation_settings"].contains("n_ctx") &&
        j["default_generation_settings"]["n_ctx"].is_number_unsigned() &&
        j["default_generation_settings"]["n_ctx"].get<std::uint64_t>() > 0 &&
        j["default_generation_settings"]["n_ctx"].get<std::uint64_t>() <= UINT32_MAX) {
        f.slot_ctx = j["default_generation_settings"]["n_ctx"].get<std::uint32_t>();
        f.slot_ctx_source = "engine /props";
    } else {
        f.slot_ctx = llama_args(model).slot_ctx();
        f.slot_ctx_source = "config args.ctx / args.parallel";
    }
    if (const auto p = projector_plan(model)) f.image_tokens = p->image_tokens;
    co_return f;
}

std::optional<Refusal> LlamaServerKind::check_before_start(const config::ModelConfig& model,
                                                           const RequestView& r) const {
    if (r.images.empty() || !mmproj_path(model).empty()) return std::nullopt;
    Refusal no;
    no.kind = Refusal::Kind::invalid_request;
    no.message = fmt::format(
        "model '{}' takes no images: it has no vision projector. Send the request to a vision model, or in "
        "loch.yaml give its entry (models.{}) the projector made for it: `args: {{mmproj: mmproj.gguf}}`",
        model.name, model.name);
    no.details = {{"images", r.images.size()}, {"fix", "args.mmproj: <the model's mmproj GGUF>"}};
    return no;
}

std::optional<RequestCost> LlamaServerKind::request_cost(const config::ModelConfig& model,
                                                         const RequestView& r) const {
    // The image encoder's device buffer was reserved at load (fixed resolution: plan/projector.hpp); what a
    // request adds is host memory: on a GPU outside the device's ledger, on the CPU the device itself.
    if (r.images.empty() || r.where == nullptr || r.where->backend != "cpu") return std::nullopt;
    const auto p = projector_plan(model);
    if (!p) return std::nullopt;
    RequestCost c;
    std::uint64_t pixels = 0;
    for (const auto& img : r.images) {
        // The base64 text twice (the HTTP body and the parsed JSON), the decoded file, its RGB pixels, the
        // resized copy in 8 and 32 bits, and the encoded tokens waiting for the language model.
        const std::uint64_t side = p->image_size;
        c.bytes += 2 * ((img.bytes + 2) / 3 * 4) + img.bytes + std::uint64_t{img.width} * img.height * 3 +
                   side * side * 3 * 5 + std::uint64_t{p->image_tokens} * p->text_embd * 4;
        pixels += std::uint64_t{img.width} * img.height;
    }
    c.why = fmt::format("{} image(s), {:.1f} Mpixel: {} (decoded and resized in host memory)",
                        r.images.size(), static_cast<double>(pixels) / 1e6, human_bytes(c.bytes));
    c.details = {{"images", r.images.size()}, {"pixels", pixels}, {"image_bytes", c.bytes}};
    return c;
}

std::optional<std::uint32_t> LlamaServerKind::cpu_threads(const config::ModelConfig& model,
                                                          const Placement& where, std::uint32_t cores,
                                                          std::uint32_t layers) const {
    const auto& a = llama_args(model);
    const std::uint32_t threads = a.threads.value_or(cores);
    if (where.backend == "cpu") return threads;
    // On a GPU the CPU computes what the settings leave there: experts or tensors kept on the CPU, or
    // layers beyond -ngl (n_layer + 1 puts the output layer on the GPU too; with the layers unknown, any
    // -ngl below "all" counts).
    ExtraPlanFlags x;
    const bool tensors_on_cpu = !read_extra_plan_flags(a.extra, x) &&
                                (x.cpu_moe || x.n_cpu_moe > 0 || !x.cpu_tensor_patterns.empty());
    const bool layers_on_cpu = a.n_gpu_layers && *a.n_gpu_layers < kAllLayers &&
                               (layers == 0 || *a.n_gpu_layers <= static_cast<int>(layers));
    if (tensors_on_cpu || layers_on_cpu) return threads;
    return std::nullopt;
}

asio::awaitable<std::optional<std::string>> templated_prompt(asio::any_io_executor ex,
                                                             const EngineAddress& engine,
                                                             const nlohmann::json& body) {
    if (!body.contains("messages") || !body["messages"].is_array()) co_return std::nullopt;
    // The text only: the engine would decode images to apply the template.
    nlohmann::json messages_text = body["messages"];
    for (auto& m : messages_text)
        if (m.is_object() && m.contains("content") && m["content"].is_array()) {
            nlohmann::json kept = nlohmann::json::array();
            for (auto& part : m["content"])
                if (!part.is_object() || type_of(part) != "image_url") kept.push_back(std::move(part));
            m["content"] = std::move(kept);
        }
    nlohmann::json tpl = {{"messages", std::move(messages_text)}};
    auto reply = co_await engine_request(ex, engine, "POST", "/apply-template", tpl.dump(), 30s);
    auto j = nlohmann::json::parse(reply.body, nullptr, false);
    if (reply.status != 200 || !j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
        co_return std::nullopt;
    co_return j["prompt"].get<std::string>();
}

asio::awaitable<std::optional<Refusal>> LlamaServerKind::check_request(asio::any_io_executor ex,
                                                                       const EngineAddress& engine,
                                                                       const ReadyFacts& facts,
                                                                       const RequestView& r) const {
    if (!facts.slot_ctx || r.route == "/v1/embeddings" || r.body == nullptr) co_return std::nullopt;
    const std::uint64_t slot_ctx = *facts.slot_ctx;
    const std::uint64_t max_tokens = r.max_tokens.value_or(0);
    const nlohmann::json& body = *r.body;
    // Every token covers at least one byte of text, so bytes bound tokens from above; templates add a few
    // special tokens per message. Below the bound no tokenization is needed (no extra round trip).
    std::uint64_t messages = 2;  // a system message or instructions, and one more
    for (const char* key : {"messages", "input"})
        if (body.contains(key) && body[key].is_array()) messages += body[key].size();
    // Each image is the projector's fixed number of tokens (its data URL is not text).
    const std::uint64_t image_tokens = r.images.size() * std::uint64_t{facts.image_tokens.value_or(0)};
    const std::uint64_t bound = r.prompt_bytes + r.prompt_token_ids + image_tokens + 32 + 16 * messages;
    if (bound + max_tokens <= slot_ctx) co_return std::nullopt;

    // Exact count from the engine itself: the chat template applied, then its tokenizer.
    std::string prompt;
    if (const auto chat = chat_messages_of(r.route, body)) {  // a chat, an Anthropic or a Responses body
        auto text = co_await templated_prompt(ex, engine, {{"messages", *chat}});
        if (!text) co_return std::nullopt;
        prompt = std::move(*text);
    } else {
        if (!body.contains("prompt") || !body["prompt"].is_string())
            co_return std::nullopt;  // arrays: the engine checks each prompt itself
        prompt = body["prompt"].get<std::string>();
    }
    nlohmann::json tk = {{"content", prompt}, {"add_special", true}, {"parse_special", true}};
    auto reply = co_await engine_request(ex, engine, "POST", "/tokenize", tk.dump(), 30s);
    auto j = nlohmann::json::parse(reply.body, nullptr, false);
    if (reply.status != 200 || !j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
        co_return std::nullopt;
    const std::uint64_t prompt_tokens = j["tokens"].size() + r.prompt_token_ids + image_tokens;
    if (prompt_tokens + max_tokens <= slot_ctx && prompt_tokens < slot_ctx) co_return std::nullopt;
    Refusal no;
    no.kind = Refusal::Kind::context_length_exceeded;
    // What would fit, and what it would take: the largest max_tokens with this prompt, the slot it needs.
    const std::uint64_t fits = prompt_tokens < slot_ctx ? slot_ctx - prompt_tokens : 0;
    const std::uint64_t needed = prompt_tokens + std::max<std::uint64_t>(max_tokens, 1);
    const std::string advice = r.model ? context_advice(*r.model, needed) : "raise the model's context";
    no.message =
        r.max_tokens
            ? fmt::format(
                  "prompt ({} tokens) + max_tokens ({}) = {} exceeds the slot context ({} tokens): {}; "
                  "or {}",
                  prompt_tokens, max_tokens, prompt_tokens + max_tokens, slot_ctx,
                  fits ? fmt::format("max_tokens up to {} fits with this prompt", fits)
                       : std::string("the prompt alone fills it, so shorten the prompt"),
                  advice)
            : fmt::format(
                  "the prompt ({} tokens) does not fit the slot context ({} tokens): shorten it, or {}",
                  prompt_tokens, slot_ctx, advice);
    no.details = {{"prompt_tokens", prompt_tokens}, {"max_tokens", max_tokens},
                  {"slot_ctx", slot_ctx},           {"largest_max_tokens", fits},
                  {"needed_slot_ctx", needed},      {"counted_by", "engine /tokenize"}};
    if (r.model)
        if (const auto limit = llama_args(*r.model).slot_ctx_limit())
            no.details["model_slot_ctx_limit"] = *limit;
    if (image_tokens) {
        no.message += fmt::format(" ({} image(s) × {} tokens)", r.images.size(), *facts.image_tokens);
        no.details["image_tokens"] = image_tokens;
    }
    co_return no;
}

const Kind& llama_server_kind() {
    static const LlamaServerKind kind;
    return kind;
}

}  // namespace loch::engines
