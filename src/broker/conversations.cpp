// Conversations: the saved-slot store and each model's run as far as its slots go (conversations.hpp).
#include "broker/conversations.hpp"

#include <fmt/format.h>

#include "core/memory.hpp"

namespace loch::broker {

Conversations::Conversations(boost::asio::any_io_executor ex, std::filesystem::path root,
                             config::SlotSaveConfig cfg, core::Clock& clock, RecentEvents& events)
    : ex_(std::move(ex)), clock_(clock), events_(events), store_(std::move(root), std::move(cfg)) {}

Conversations::~Conversations() {
    *alive_ = false;
}

void Conversations::note(std::string_view kind, const std::string& model, std::string message,
                         nlohmann::json extra, bool warn) {
    events_.note(kind, {{"model", model}}, std::move(message), std::move(extra), warn);
}

std::optional<std::vector<std::string>> Conversations::with_slot_files(
    const std::string& model, const engines::Kind& kind, const config::Config& cfg,
    const config::ModelConfig& mc, const engines::Placement& where, engines::EngineSpec& spec) {
    runs_.erase(model);
    if (!store_.config().enabled || !kind.keeps_slot_files(mc)) return std::nullopt;
    auto argv = engines::make_engine_spec(cfg, mc, where, 1).argv;
    const auto folder = store_.folder(argv);
    if (!folder) return std::nullopt;
    kind.launch_with_slot_files(*folder, spec);
    return argv;
}

// The folder is made and its files checked against the launch's model file and engine build on the
// store's worker while the engine loads; until then (a few hundred microseconds against a load of tens of
// milliseconds at least) the engine neither saves nor restores.
boost::asio::awaitable<void> Conversations::prepare(std::string model,
                                                    std::shared_ptr<engines::EngineRun> engine,
                                                    std::vector<std::string> argv) {
    auto alive = alive_;
    const engines::EngineRun* run = engine.get();
    runs_[model] = Run{run, {}, {}};
    auto key = slot_folder(argv);
    const bool ok = co_await store_.prepare(std::move(argv));
    // (Unless a newer run began meanwhile.)
    if (const auto it = runs_.find(model); *alive && ok && it != runs_.end() && it->second.engine == run)
        it->second.key = std::move(key);
}

bool Conversations::saves(const std::string& model) const {
    const auto it = runs_.find(model);
    return it != runs_.end() && !it->second.key.empty();
}

boost::asio::awaitable<void> Conversations::save_before_stop(std::string model, const engines::Kind& kind,
                                                             std::shared_ptr<engines::EngineRun> engine,
                                                             std::chrono::seconds limit) {
    auto alive = alive_;
    const auto it = runs_.find(model);
    if (it == runs_.end() || it->second.engine != engine.get() || it->second.key.empty()) co_return;
    const std::string key = it->second.key;
    if (!co_await store_.may_save(key) || !*alive) co_return;
    const engines::EngineAddress to{engine->host(), engine->port(), engine->spec().api_key};
    const auto started = clock_.now();
    const auto prefix = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count());
    auto saved = co_await kind.save_slots(ex_, to, prefix, store_.config().min_tokens, limit);
    if (!*alive || saved.empty()) co_return;
    std::uint64_t tokens = 0, bytes = 0;
    for (const auto& s : saved) tokens += s.tokens, bytes += s.bytes;
    const auto n = saved.size();
    const auto dropped = co_await store_.add(key, std::move(saved));
    if (!*alive) co_return;
    const double ms = std::chrono::duration<double, std::milli>(clock_.now() - started).count();
    note("slots_saved", model,
         fmt::format("{} slot(s) saved before the stop: {} tokens, {} in {:.0f} ms{}", n, tokens,
                     human_bytes(bytes), ms,
                     dropped.empty() ? std::string()
                                     : fmt::format("; {} older file(s) dropped (slot_save.max_disk {})",
                                                   dropped.size(), human_bytes(store_.config().max_disk))),
         {{"slots", n}, {"tokens", tokens}, {"bytes", bytes}, {"ms", ms}, {"dropped", dropped.size()}});
}

const Conversations::Run* Conversations::run_of(const Lease& lease) const {
    const auto it = runs_.find(lease.model());
    if (it == runs_.end() || it->second.key.empty() || it->second.engine != lease.engine().get())
        return nullptr;
    return &it->second;
}

bool Conversations::has_saved(const Lease& lease) const {
    const Run* run = run_of(lease);
    return run && store_.has(run->key);
}

bool Conversations::may_restore(const Lease& lease, const engines::RequestView& r) const {
    const Run* run = run_of(lease);
    return run && store_.has(run->key) &&
           store_.may_match(run->key, lease.kind().prompt_probe(r), run->restored);
}

boost::asio::awaitable<std::optional<nlohmann::json>> Conversations::restore(const Lease& lease,
                                                                             const engines::RequestView& r,
                                                                             std::string& body) {
    if (!run_of(lease)) co_return std::nullopt;
    auto alive = alive_;
    const std::string model = lease.model();
    const auto text = co_await lease.kind().prompt_text(ex_, lease.address(), r);
    // (The run is looked up again after each wait: the engine may have ended, and a new run replaced it.)
    const Run* run = *alive && text ? run_of(lease) : nullptr;
    if (!run) co_return std::nullopt;
    const auto entry = store_.match(run->key, *text, run->restored);
    if (!entry) co_return std::nullopt;
    runs_[model].restored.insert(entry->file);  // tried once per run, whatever comes of it
    const auto started = clock_.now();
    const auto got = co_await lease.kind().restore_slot(ex_, lease.address(), entry->file);
    if (!*alive || !run_of(lease)) co_return std::nullopt;
    if (!got) {
        note("slot_restore_failed", model,
             fmt::format("the engine did not restore {} ({} tokens): the request reads its prompt",
                         entry->file, entry->tokens),
             {{"file", entry->file}}, true);
        co_return std::nullopt;
    }
    lease.kind().pin_to_slot(body, got->slot);
    const double ms = std::chrono::duration<double, std::milli>(clock_.now() - started).count();
    // Noted once the first answer says whether it took (confirm).
    co_return nlohmann::json{{"file", entry->file}, {"slot", got->slot}, {"tokens", got->tokens}, {"ms", ms}};
}

std::optional<bool> Conversations::confirm(const std::string& model, const nlohmann::json& restored,
                                           std::optional<std::uint64_t> cached,
                                           std::optional<std::uint64_t> prompt_tokens) {
    const auto tokens = restored.value("tokens", std::uint64_t{0});
    const auto file = restored.value("file", std::string());
    const auto slot = restored.value("slot", -1);
    const auto ms = restored.value("ms", 0.0);
    nlohmann::json figures = {{"file", file}, {"slot", slot}, {"tokens", tokens}, {"ms", ms}};
    if (cached) figures["cached_tokens"] = *cached;
    if (prompt_tokens) figures["prompt_tokens"] = *prompt_tokens;
    if (!cached || *cached * 2 >= tokens) {
        ++restores_[model].ok;
        note("slot_restored", model,
             fmt::format("restored a saved conversation into slot {}: {} tokens in {:.0f} ms (saved {}); {}",
                         slot, tokens, ms, file,
                         cached ? fmt::format("the answer reused {} prompt token(s)", *cached)
                                : std::string("the answer did not say how much of the prompt it reused")),
             figures);
        return cached ? std::optional(true) : std::nullopt;
    }
    ++restores_[model].failed;
    note("slot_restore_failed", model,
         fmt::format(
             "the engine said it restored {} ({} tokens) into slot {}, but its answer reused {} of the "
             "prompt's {} token(s): the restore did not take, and the prompt was read again",
             file, tokens, slot, *cached, prompt_tokens ? std::to_string(*prompt_tokens) : "?"),
         figures, true);
    return false;
}

Conversations::Restores Conversations::restores(const std::string& model) const {
    const auto it = restores_.find(model);
    return it == restores_.end() ? Restores{} : it->second;
}

}  // namespace loch::broker
