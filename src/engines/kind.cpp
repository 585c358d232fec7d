// The optional hooks of engines/kind.hpp: doing nothing is correct.
#include "engines/kind.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace loch::engines {

namespace asio = boost::asio;

asio::awaitable<Footprint> Kind::estimate(const EstimateContext&, const config::Config& cfg,
                                          const config::ModelConfig& model,
                                          const std::vector<Placement>& devices) const {
    co_return formula(cfg, model, devices);
}

std::optional<MemoryFigure> Kind::measure(const std::vector<std::string>&, const Placement&) const {
    return std::nullopt;
}

std::vector<Need> Kind::split_formula(const config::Config&, const config::ModelConfig&,
                                      const Placement&) const {
    return {};
}

std::vector<std::optional<MemoryFigure>> Kind::measure_split(const std::vector<std::string>& startup_log,
                                                             const Placement& where) const {
    std::vector<std::optional<MemoryFigure>> out(where.all().size());
    out.front() = measure(startup_log, where);
    return out;
}

asio::awaitable<ReadyFacts> Kind::after_ready(asio::any_io_executor, const EngineAddress&,
                                              const config::ModelConfig&) const {
    co_return ReadyFacts{};
}

std::optional<std::uint64_t> Kind::configured_slot_ctx(const config::ModelConfig&) const {
    return std::nullopt;
}

std::string Kind::context_advice(const config::ModelConfig& model, std::uint64_t needed) const {
    return fmt::format("raise the context of model '{}' to at least {} tokens", model.name, needed);
}

std::uint32_t Kind::slots(const config::ModelConfig& model) const {
    return std::max<std::uint32_t>(1, model.concurrency);
}

asio::awaitable<std::optional<Refusal>> Kind::check_request(asio::any_io_executor, const EngineAddress&,
                                                            const ReadyFacts&, const RequestView&) const {
    co_return std::nullopt;
}

std::optional<Refusal> Kind::check_before_start(const config::ModelConfig&, const RequestView&) const {
    return std::nullopt;
}

std::optional<Refusal> Kind::explain_error(const config::ModelConfig&, std::string_view, unsigned,
                                           std::string_view) const {
    return std::nullopt;
}

std::optional<RequestCost> Kind::request_cost(const config::ModelConfig&, const RequestView&) const {
    return std::nullopt;
}

std::optional<nlohmann::json> Kind::request_progress(const std::vector<std::string>&) const {
    return std::nullopt;
}

std::uint32_t Kind::sleep_level(const config::ModelConfig&) const {
    return 0;
}

SleepFootprint Kind::asleep(const config::ModelConfig&, const Need& awake) const {
    return {awake.bytes, 0, "a kind without sleep holds all of it"};
}

asio::awaitable<bool> Kind::sleep(asio::any_io_executor, const EngineAddress&, std::uint32_t) const {
    co_return false;
}

asio::awaitable<bool> Kind::wake(asio::any_io_executor, const EngineAddress&, std::uint32_t) const {
    co_return false;
}

asio::awaitable<std::vector<SavedSlot>> Kind::save_slots(asio::any_io_executor, const EngineAddress&,
                                                         std::string, std::uint64_t,
                                                         std::chrono::seconds) const {
    co_return std::vector<SavedSlot>{};
}

asio::awaitable<std::optional<std::string>> Kind::prompt_text(asio::any_io_executor, const EngineAddress&,
                                                              const RequestView&) const {
    co_return std::nullopt;
}

asio::awaitable<std::optional<RestoredSlot>> Kind::restore_slot(asio::any_io_executor, const EngineAddress&,
                                                                std::string) const {
    co_return std::nullopt;
}

std::string Kind::upstream(std::string_view route, std::string_view, std::string&) const {
    return std::string(route);
}

bool Kind::serves(const config::ModelConfig&, std::string_view route) const {
    // The OpenAI text routes, and what OpenAI-compatible servers answer beside them (the pinned llama-server
    // serves all eight): the Responses API, Anthropic's Messages API, their token counts, reranking.
    return route == "/v1/chat/completions" || route == "/v1/completions" || route == "/v1/embeddings" ||
           route == "/v1/responses" || route == "/v1/messages" || route == "/v1/rerank" ||
           route == "/v1/messages/count_tokens" || route == "/v1/responses/input_tokens";
}

}  // namespace loch::engines
