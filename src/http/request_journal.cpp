// What is kept of every request (request_journal.hpp).
#include "http/request_journal.hpp"

#include <charconv>
#include <random>

#include <fmt/format.h>

#include "http/errors.hpp"
#include "observe/request_record.hpp"

namespace loch::http {

RequestJournal::RequestJournal(boost::asio::any_io_executor ex, broker::Broker& broker,
                               observe::Metrics& metrics, std::filesystem::path file,
                               std::chrono::milliseconds flush_after)
    : broker_(broker),
      metrics_(metrics),
      log_(std::move(file)),
      flush_timer_(std::move(ex)),
      flush_after_(flush_after),
      prefix_(fmt::format("{:06x}-", std::random_device{}() & 0xffffff)) {}

RequestJournal::~RequestJournal() {
    *alive_ = false;
}

std::string RequestJournal::id_of(const Request& req) {
    if (auto given = observe::checked_request_id(req["X-Request-Id"])) return std::move(*given);
    return next_id();
}

std::string RequestJournal::next_id() {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, next_++).ptr;
    std::string id;
    id.reserve(prefix_.size() + static_cast<std::size_t>(end - digits));
    id.append(prefix_).append(digits, end);
    return id;
}

void RequestJournal::log(observe::RequestRecord rec) {
    if (!log_.write(std::move(rec)) || flush_armed_) return;
    flush_armed_ = true;
    flush_timer_.expires_after(flush_after_);
    flush_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](boost::system::error_code) {
        if (auto a = alive.lock(); !a || !*a) return;
        flush_armed_ = false;
        log_.flush();
    });
}

void RequestJournal::log_unread(const broker::Error& e) {
    observe::RequestRecord rec;
    rec.id = next_id();
    rec.route = "-";
    rec.status = static_cast<unsigned>(status_of(e.kind()));
    rec.error_type = broker::to_string(e.kind());
    log(std::move(rec));
}

void RequestJournal::finish(observe::RequestRecord rec, std::chrono::steady_clock::time_point started) {
    rec.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (rec.restore) {  // a saved conversation went back into a slot: did the answer reuse it?
        const bool answered = rec.status > 0 && rec.status < 300;
        const auto took = broker_.conversations().confirm(
            rec.model, *rec.restore, answered ? rec.cached_tokens : std::nullopt, rec.prompt_tokens);
        if (took.value_or(true))
            rec.restored_tokens = rec.restore->value("tokens", std::uint64_t{0});
        else
            rec.restore_failed = true;
    }
    metrics_.record(rec);
    log(std::move(rec));
}

}  // namespace loch::http
