#include "http/sse.hpp"

namespace loch::http {

std::vector<std::string> SseFramer::feed(std::string_view bytes) {
    std::vector<std::string> out;
    pending_.append(bytes);
    std::size_t start = 0;
    // Resume a little before the old end: a terminator may straddle two reads.
    std::size_t pos = scanned_ > 3 ? scanned_ - 3 : 0;
    while (pos < pending_.size()) {
        std::size_t end = std::string::npos;
        const std::size_t nn = pending_.find("\n\n", pos);
        const std::size_t rnrn = pending_.find("\r\n\r\n", pos);
        std::size_t len = 0;
        if (nn != std::string::npos && (rnrn == std::string::npos || nn < rnrn + 2)) {
            end = nn;
            len = 2;
        } else if (rnrn != std::string::npos) {
            end = rnrn;
            len = 4;
        }
        if (end == std::string::npos) break;
        out.emplace_back(pending_.substr(start, end + len - start));
        start = end + len;
        pos = start;
    }
    pending_.erase(0, start);
    if (pending_.size() > max_event_) {
        out.emplace_back(std::move(pending_));
        pending_.clear();
    }
    scanned_ = pending_.size();
    return out;
}

std::string SseFramer::take_rest() {
    std::string rest = std::move(pending_);
    pending_.clear();
    scanned_ = 0;
    return rest;
}

bool is_done_event(std::string_view event) {
    while (!event.empty() && (event.back() == '\n' || event.back() == '\r')) event.remove_suffix(1);
    return event == "data: [DONE]" || event == "data:[DONE]";
}

}  // namespace loch::http
