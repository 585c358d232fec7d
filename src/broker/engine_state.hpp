// broker/engine_state — where a model's engine is in its life: the states lifecycle.cpp moves it through
// (docs/broker.md tables the transitions), read by the serve decision and the views.
#pragma once

#include <string_view>

namespace loch::broker {

// asleep: the engine runs but has given back most of its device memory (vLLM's sleep mode, Kind::sleep);
// a request wakes it through admission like a start, only cheaper.
enum class ModelState { stopped, loading, ready, stopping, asleep };
inline std::string_view to_string(ModelState s) {
    switch (s) {
        case ModelState::stopped:
            return "stopped";
        case ModelState::loading:
            return "loading";
        case ModelState::ready:
            return "ready";
        case ModelState::stopping:
            return "stopping";
        case ModelState::asleep:
            return "asleep";
    }
    return "?";
}

}  // namespace loch::broker
