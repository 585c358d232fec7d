// engines/log_ring — the last N lines of an engine's output, kept in memory for error messages and the
// log-tail endpoint. Bytes arrive in arbitrary chunks; a partial last line is held until its newline.
// Lines are kept as a terminal would show them: a carriage return inside a line starts it over (a progress
// bar's redraws leave their last state) and terminal control sequences (colours, erase-line) are dropped.
// Not thread-safe: used on the engine's executor.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace loch::engines {

class LogRing {
  public:
    explicit LogRing(std::size_t max_lines = 500, std::size_t max_line_bytes = 4096);

    // Feed raw output; calls nothing, returns the complete lines it produced (for log parsers).
    std::vector<std::string> append(std::string_view chunk);
    // Flush a pending partial line (at EOF).
    std::vector<std::string> finish();

    // The last `n` complete lines, oldest first (all when n >= size()).
    std::vector<std::string> tail(std::size_t n) const;
    std::vector<std::string> lines() const { return tail(lines_.size()); }
    std::size_t size() const { return lines_.size(); }
    std::size_t total_lines() const { return total_; }  // lines ever seen (including dropped)

  private:
    void push(std::string line);

    std::size_t max_lines_;
    std::size_t max_line_bytes_;
    std::deque<std::string> lines_;
    std::string partial_;
    std::size_t total_ = 0;
};

}  // namespace loch::engines
