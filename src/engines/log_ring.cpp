#include "engines/log_ring.hpp"

namespace loch::engines {

LogRing::LogRing(std::size_t max_lines, std::size_t max_line_bytes)
    : max_lines_(max_lines == 0 ? 1 : max_lines), max_line_bytes_(max_line_bytes == 0 ? 1 : max_line_bytes) {}

void LogRing::push(std::string line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > max_line_bytes_) line.resize(max_line_bytes_);
    lines_.push_back(std::move(line));
    ++total_;
    while (lines_.size() > max_lines_) lines_.pop_front();
}

std::vector<std::string> LogRing::append(std::string_view chunk) {
    std::vector<std::string> out;
    while (!chunk.empty()) {
        const auto nl = chunk.find('\n');
        if (nl == std::string_view::npos) {
            // Keep at most one line's worth of a line that never ends (binary garbage, progress bars).
            const std::size_t room =
                max_line_bytes_ > partial_.size() ? max_line_bytes_ - partial_.size() : 0;
            partial_.append(chunk.substr(0, room));
            break;
        }
        const std::size_t room = max_line_bytes_ > partial_.size() ? max_line_bytes_ - partial_.size() : 0;
        partial_.append(chunk.substr(0, std::min(nl, room)));
        chunk.remove_prefix(nl + 1);
        if (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
        out.push_back(partial_);
        push(std::move(partial_));
        partial_.clear();
    }
    return out;
}

std::vector<std::string> LogRing::finish() {
    if (partial_.empty()) return {};
    std::vector<std::string> out{partial_};
    push(std::move(partial_));
    partial_.clear();
    return out;
}

std::vector<std::string> LogRing::tail(std::size_t n) const {
    const std::size_t k = std::min(n, lines_.size());
    return std::vector<std::string>(lines_.end() - static_cast<std::ptrdiff_t>(k), lines_.end());
}

}  // namespace loch::engines
