// http/responses_api — the Responses API owned by loch (issue 53): what the engine answers on POST
// /v1/responses is reshaped as OpenAI defines it (responses/shape.hpp) and kept (responses/store.hpp, in
// the Batch API's database) unless the request says `store: false`; GET|DELETE /v1/responses/{id} and
// GET /v1/responses/{id}/input_items answer from the store; a request's `previous_response_id` is served by
// putting the stored conversation before its input, so that multi-turn works on any engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/thread_pool.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "http/router.hpp"
#include "http/server_options.hpp"
#include "http/translation.hpp"
#include "responses/shape.hpp"

namespace loch::responses {
class Store;
}

namespace loch::http {

// One POST /v1/responses on its way: what its Response echoes, and what is kept when it ends.
struct ResponseTurn {
    nlohmann::json request;  // the client's body without its input (the fields the Response echoes)
    std::string previous;    // previous_response_id, as the client sent it
    nlohmann::json input;    // its own input items
    nlohmann::json context;  // what the engine was given: the earlier turns' items, then `input`
    bool store = true;
};

class ResponsesApi {
  public:
    explicit ResponsesApi(const ServerOptions& options);
    ~ResponsesApi();
    ResponsesApi(const ResponsesApi&) = delete;
    ResponsesApi& operator=(const ResponsesApi&) = delete;

    using Request = boost::beast::http::request<boost::beast::http::string_body>;
    // GET|DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items (?order=asc|desc, limit, after).
    // Throws broker::Error (not_found).
    nlohmann::json answer(const Request& req, const Route& r);

    // A POST /v1/responses before it is checked and sent: a previous_response_id is replaced in `body` by
    // the stored conversation. nullopt for a body that is not a JSON object (the request's own checks say
    // why). Throws broker::Error (not_found) for a previous response that is not kept.
    std::optional<ResponseTurn> prepare(std::string& body);
    // The finished Response, kept when its turn asks for it (a failure to keep it is logged, never the
    // client's error: the answer is already theirs).
    void keep(const ResponseTurn& turn, const nlohmann::json& response);

  private:
    responses::Store* store();  // opened at first use; null without a state folder
    // The write-ahead log's pages copied into the database (its fsync) on a worker, every few MiB kept: the
    // store's connection never checkpoints on the loop (responses/store.hpp).
    void checkpoint_now_and_then(std::uint64_t bytes_kept);
    const ServerOptions& options_;
    std::unique_ptr<responses::Store> store_;
    bool store_failed_ = false;
    std::uint64_t unchecked_bytes_ = 0;
    std::shared_ptr<std::atomic<bool>> checkpointing_ = std::make_shared<std::atomic<bool>>(false);
    boost::asio::thread_pool work_{1};  // last: joined (a checkpoint finished) before the rest goes
};

// The engine's Responses answer, whole or streamed, as OpenAI's; kept through `api` when it completes.
class ResponsesShape : public Translation {
  public:
    ResponsesShape(ResponsesApi& api, ResponseTurn turn) : api_(api), turn_(std::move(turn)) {}
    // The model's configured name, once the request has its engine (before the first answer byte).
    void name_model(const std::string& model);
    std::string answer(std::string_view engine_body, unsigned status) override;
    std::string event(std::string_view sse_event) override;
    std::string end() override;

  private:
    ResponsesApi& api_;
    ResponseTurn turn_;
    nlohmann::json echoed_;
    std::optional<responses::EventShaper> shaper_;
    bool kept_ = false;
};

}  // namespace loch::http
