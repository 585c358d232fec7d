// http/request_journal — what is kept of every request the server answers: its id (the client's
// X-Request-Id when it is safe to log and echo, else loch's own: a random prefix per run, then a counter, so
// ids are unique across restarts), its line in the request log (buffered, and flushed by a timer armed for
// the first line: within `flush_after` of its end), and for a model request its metrics and the check of a
// restored conversation by the first answer. Every handler writes through it; it calls none of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "broker/broker.hpp"
#include "observe/metrics.hpp"
#include "observe/request_log.hpp"

namespace loch::http {

class RequestJournal {
  public:
    RequestJournal(boost::asio::any_io_executor ex, broker::Broker& broker, observe::Metrics& metrics,
                   std::filesystem::path file, std::chrono::milliseconds flush_after);
    ~RequestJournal();
    RequestJournal(const RequestJournal&) = delete;
    RequestJournal& operator=(const RequestJournal&) = delete;

    using Request = boost::beast::http::request<boost::beast::http::string_body>;
    std::string id_of(const Request& req);  // the client's, when usable, else next_id()
    std::string next_id();                  // "<run prefix>-<counter>"
    std::uint64_t ids_given() const { return next_ - 1; }

    // One request's line.
    void log(observe::RequestRecord rec);
    // A request that failed before it was read (its header never came whole): a line with its error.
    void log_unread(const broker::Error& e);
    // A model request's end: its duration, whether a restored conversation took, its metrics, its line.
    void finish(observe::RequestRecord rec, std::chrono::steady_clock::time_point started);
    // Everything pending goes to the file now (shutdown).
    void flush() { log_.flush(); }

  private:
    broker::Broker& broker_;
    observe::Metrics& metrics_;
    observe::RequestLog log_;
    boost::asio::steady_timer flush_timer_;
    std::chrono::milliseconds flush_after_;
    bool flush_armed_ = false;
    std::uint64_t next_ = 1;
    std::string prefix_;  // a random prefix per run ("5f090c-")
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace loch::http
