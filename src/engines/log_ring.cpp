#include "engines/log_ring.hpp"

namespace loch::engines {

LogRing::LogRing(std::size_t max_lines, std::size_t max_line_bytes)
    : max_lines_(max_lines == 0 ? 1 : max_lines), max_line_bytes_(max_line_bytes == 0 ? 1 : max_line_bytes) {}

namespace {

// Terminal control sequences an engine writes for a terminal (colours, "erase to end of line" after a
// progress bar): CSI = ESC '[' parameters intermediates final; any other ESC takes one more byte.
std::string without_terminal_codes(std::string line) {
    std::string out;
    out.reserve(line.size());
    for (std::size_t i = 0; i < line.size(); ++i) {
        if (line[i] != '\x1b') {
            out.push_back(line[i]);
            continue;
        }
        if (i + 1 < line.size() && line[i + 1] == '[') {
            std::size_t j = i + 2;
            while (j < line.size() && static_cast<unsigned char>(line[j]) >= 0x20 &&
                   static_cast<unsigned char>(line[j]) <= 0x3f)
                ++j;
            i = j < line.size() ? j : line.size();  // the final byte, or the cut end
        } else {
            ++i;
        }
    }
    return out;
}

}  // namespace

void LogRing::push(std::string line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    line = without_terminal_codes(std::move(line));
    if (line.size() > max_line_bytes_) line.resize(max_line_bytes_);
    lines_.push_back(std::move(line));
    ++total_;
    while (lines_.size() > max_lines_) lines_.pop_front();
}

std::vector<std::string> LogRing::append(std::string_view chunk) {
    std::vector<std::string> out;
    while (!chunk.empty()) {
        const auto nl = chunk.find('\n');
        std::string_view piece = chunk.substr(0, nl);
        // A carriage return that does not end the line returns to its start and what follows overwrites it
        // (progress bars redraw themselves so): keep the text after the last one, as a terminal shows it.
        if (!piece.empty() && !partial_.empty() && partial_.back() == '\r') partial_.clear();
        if (const auto cr = piece.find_last_of('\r'); cr != std::string_view::npos && cr + 1 < piece.size()) {
            partial_.clear();
            piece.remove_prefix(cr + 1);
        }
        // Keep at most one line's worth of a line that never ends (binary garbage).
        const std::size_t room = max_line_bytes_ > partial_.size() ? max_line_bytes_ - partial_.size() : 0;
        partial_.append(piece.substr(0, room));
        if (nl == std::string_view::npos) break;
        chunk.remove_prefix(nl + 1);
        if (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
        push(std::move(partial_));
        out.push_back(lines_.back());
        partial_.clear();
    }
    return out;
}

std::vector<std::string> LogRing::finish() {
    if (partial_.empty()) return {};
    push(std::move(partial_));
    partial_.clear();
    return {lines_.back()};
}

std::vector<std::string> LogRing::tail(std::size_t n) const {
    const std::size_t k = std::min(n, lines_.size());
    return std::vector<std::string>(lines_.end() - static_cast<std::ptrdiff_t>(k), lines_.end());
}

}  // namespace loch::engines
