// http/sse — splits a Server-Sent Events byte stream into whole events so that loch forwards the engine's
// stream event by event (never a half event, never the whole body) and knows where an event ends when it
// has to append its own `error` event. Events end at a blank line ("\n\n" or "\r\n\r\n", RFC 8895).
//
// The relay's path (feed_views, complete) copies nothing: the events of one read are views into the
// framer's buffer and, one after another, a single contiguous run of bytes that leaves in one write.
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

    // Appends bytes; returns the complete events they finish, each with its terminating blank line, as
    // views into the framer's buffer — valid until the next feed or take_rest.
    const std::vector<std::string_view>& feed_views(std::string_view bytes);
    // The bytes of the events the last feed_views returned, as one run (same validity).
    std::string_view complete() const { return {buf_.data(), done_}; }
    // The same events as copies.
    std::vector<std::string> feed(std::string_view bytes);
    // Whatever is left of an unterminated event (at end of stream).
    std::string take_rest();
    bool mid_event() const { return buf_.size() > done_; }

  private:
    std::size_t max_event_;
    std::string buf_;          // the last feed's complete events (first done_ bytes), then an unfinished one
    std::size_t done_ = 0;     // bytes at the front of buf_ that the last feed returned
    std::size_t scanned_ = 0;  // bytes of the unfinished part already searched for a terminator
    std::vector<std::string_view> events_;
};

// True for `data: [DONE]` (OpenAI's end-of-stream marker).
bool is_done_event(std::string_view event);
// True for the event after which a client has its whole answer: chat's [DONE], the Responses API's
// response.completed / incomplete / failed, Anthropic's message_stop. A client may close the connection
// right after it (Codex does) without having left early.
bool is_final_event(std::string_view event);

}  // namespace loch::http
