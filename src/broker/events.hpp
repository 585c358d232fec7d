// broker/events — what happened, said once: each event is one log line (a warning when it is one) and one
// entry among the most recent ones that /loch/status, `loch ps` and the dashboard show. An event is
// {at, kind, <subject: model | hold + job | holder>, message, <extra figures>}.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace loch::broker {

class RecentEvents {
  public:
    static constexpr std::size_t kKept = 200;

    // `subject`: {"model": …} or {"hold": …, "job": …} or {"holder": …}, merged into the event; `extra`'s
    // figures too.
    void note(std::string_view kind, const nlohmann::json& subject, std::string message,
              nlohmann::json extra = {}, bool warn = false);
    // The kept events, oldest first.
    nlohmann::json recent() const;

  private:
    std::deque<nlohmann::json> kept_;
};

}  // namespace loch::broker
