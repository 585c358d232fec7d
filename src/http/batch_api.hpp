// http/batch_api — OpenAI's Batch API (issue 29, docs/batches.md): its files (batch_api_files.cpp: POST
// /v1/files streamed to disk as it arrives and checked line by line off the loop, GET|DELETE /v1/files/{id},
// its content) and its batches (batch_api_batches.cpp: POST|GET /v1/batches, GET /v1/batches/{id}, POST
// /v1/batches/{id}/cancel) on batch/runner, which sends each item back to loch's own port as a client would
// (X-Loch-Priority: batch), so every route, limit, request log line and metric applies to items unchanged.
// A handler: the server hands it the routes that are its own and a POST /v1/files before its body is read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "batch/input_file.hpp"
#include "broker/broker.hpp"
#include "http/request_journal.hpp"
#include "http/router.hpp"
#include "http/server_options.hpp"

namespace loch::batch {
class Store;
class Runner;
struct ItemAnswer;
}  // namespace loch::batch

namespace loch::http {

class BatchApi {
  public:
    // What only the server can do for it.
    struct ServerSide {
        std::function<std::uint16_t()> port;                 // loch's own port (the items' way back in)
        std::function<bool(const std::string& id)> preempt;  // ends a running item for a person
        std::function<void(const std::string& id)>
            cancel;  // ends an item in flight (its batch was cancelled)
    };
    // `options`: the server's, read as they are at each use (a reload changes the API keys).
    BatchApi(boost::asio::any_io_executor ex, broker::Broker& broker, RequestJournal& journal,
             const ServerOptions& options, ServerSide server);
    ~BatchApi();
    BatchApi(const BatchApi&) = delete;
    BatchApi& operator=(const BatchApi&) = delete;

    void start();  // the runner, when there is a batch_dir
    void stop();   // no new item; the running ones end with their requests and are requeued
    // The unfinished batches' progress (loch status, the dashboard), empty without a Batch API.
    nlohmann::json batches() const;

    using Request = boost::beast::http::request<boost::beast::http::string_body>;
    // POST /v1/files is the one route whose body is not read into memory: the server hands it over after the
    // header, and receive_upload streams it to a file as it arrives (its API key checked first), then checks
    // it (batch/input_file.hpp) and keeps it, or says every problem by line.
    static bool is_file_upload(const Request& req);
    boost::asio::awaitable<bool> receive_upload(
        boost::beast::tcp_stream& stream, boost::beast::flat_buffer& buffer,
        boost::beast::http::request_parser<boost::beast::http::string_body>& parser);
    boost::asio::awaitable<bool> files_route(boost::beast::tcp_stream& stream, const Request& req,
                                             const Route& r);
    boost::asio::awaitable<bool> batches_route(boost::beast::tcp_stream& stream, const Request& req,
                                               const Route& r);

  private:
    boost::asio::awaitable<nlohmann::json> accept_file(std::filesystem::path upload,
                                                       std::string content_type);
    batch::InputRules input_rules() const;  // what a line may name, from the config now
    batch::Store& store_or_refuse();        // throws not_found when there is no batch_dir
    boost::asio::awaitable<batch::ItemAnswer> send_item(std::string url, std::string body,
                                                        std::string request_id);

    boost::asio::any_io_executor ex_;
    broker::Broker& broker_;
    RequestJournal& journal_;
    const ServerOptions& options_;
    ServerSide server_;
    std::shared_ptr<batch::Runner> runner_;  // when there is a batch_dir
    // Blocking work off the loop (core/off_loop.hpp): an upload's check, a batch's output file. One thread:
    // such work is rare and must not take the second core from the engines.
    boost::asio::thread_pool work_{1};
};

}  // namespace loch::http
