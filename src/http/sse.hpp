// http/sse — splits a Server-Sent Events byte stream into whole events so that loch forwards the engine's
// stream event by event (never a half event, never the whole body) and knows where an event ends when it
// has to append its own `error` event. Events end at a blank line ("\n\n" or "\r\n\r\n", RFC 8895).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace loch::http {

class SseFramer {
  public:
    // An event larger than this is forwarded as it is rather than held without bound.
    explicit SseFramer(std::size_t max_event_bytes = 8 * 1024 * 1024) : max_event_(max_event_bytes) {}

    // Appends bytes; returns the complete events they finish, each with its terminating blank line.
    std::vector<std::string> feed(std::string_view bytes);
    // Whatever is left of an unterminated event (at end of stream).
    std::string take_rest();
    bool mid_event() const { return !pending_.empty(); }

  private:
    std::size_t max_event_;
    std::string pending_;
    std::size_t scanned_ = 0;  // bytes of pending_ already searched for a terminator
};

// True for `data: [DONE]` (OpenAI's end-of-stream marker).
bool is_done_event(std::string_view event);

}  // namespace loch::http
