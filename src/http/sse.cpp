#include "http/sse.hpp"

namespace loch::http {

const std::vector<std::string_view>& SseFramer::feed_views(std::string_view bytes) {
    buf_.erase(0, done_);  // what the last feed returned has been used
    done_ = 0;
    events_.clear();
    buf_.append(bytes);
    std::size_t start = 0;
    // An event ends at the '\n' that completes "\n\n" or "\r\n\r\n" inside it; bytes searched before are
    // looked back at, not searched again (a terminator may straddle two reads).
    for (std::size_t i = scanned_; i < buf_.size(); ++i) {
        if (buf_[i] != '\n') continue;
        const bool nn = i >= start + 1 && buf_[i - 1] == '\n';
        const bool rnrn = i >= start + 3 && buf_[i - 1] == '\r' && buf_[i - 2] == '\n' && buf_[i - 3] == '\r';
        if (!nn && !rnrn) continue;
        events_.emplace_back(buf_.data() + start, i + 1 - start);
        start = i + 1;
    }
    done_ = start;
    if (buf_.size() - done_ > max_event_) {
        events_.emplace_back(buf_.data() + done_, buf_.size() - done_);
        done_ = buf_.size();
    }
    scanned_ = buf_.size() - done_;
    return events_;
}

std::vector<std::string> SseFramer::feed(std::string_view bytes) {
    const auto& views = feed_views(bytes);
    return {views.begin(), views.end()};
}

std::string SseFramer::take_rest() {
    std::string rest = buf_.substr(done_);
    buf_.clear();
    done_ = 0;
    scanned_ = 0;
    events_.clear();
    return rest;
}

bool is_done_event(std::string_view event) {
    while (!event.empty() && (event.back() == '\n' || event.back() == '\r')) event.remove_suffix(1);
    return event == "data: [DONE]" || event == "data:[DONE]";
}

bool is_final_event(std::string_view event) {
    if (is_done_event(event)) return true;
    for (const std::string_view type :
         {"response.completed", "response.incomplete", "response.failed", "message_stop"})
        if (event.find(type) != std::string_view::npos &&
            (event.starts_with("event: ")
                 ? event.substr(7).starts_with(type)
                 : event.find("\"type\":\"" + std::string(type) + "\"") != std::string_view::npos))
            return true;
    return false;
}

}  // namespace loch::http
