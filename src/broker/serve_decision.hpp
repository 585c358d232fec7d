// broker/serve_decision — one request's way to a slot, decided before anything is done: what the broker
// knows of the model and the request now goes in, the effects that serve it come out, in the order the
// broker carries them out (serve.cpp: Broker::carry_out, the one executor). Pure: it starts, stops, books
// and throws nothing, so each rule is a unit test on the effects (tests/broker/serve_decision_test.cpp).
//
// The rules, in order (docs/broker.md says why):
//   - shutting down, quarantined → refused;
//   - ready with a free slot, its exclusive devices free and the CPU's turn → granted (its own memory booked
//     first where it has some: now if it fits, else idle engines evicted for it, else it waits), unless it
//     is batch work that yields to a person's request; otherwise it waits, saying for what;
//   - loading, stopping → it waits;
//   - stopped or asleep: after a failure's backoff, with an engine build that reaches a device and a planned
//     footprint, admission (broker/admission.hpp) decides: start (wake an asleep engine where it sleeps,
//     restart it elsewhere), evict then start, wait for room (its files read ahead meanwhile), or refuse with
//     the numbers and what would help.
// The answers that cost (admission, the CPU's turns, the exclusive locks) are asked through ServeQuestions,
// only where a rule needs them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/admission.hpp"
#include "broker/engine_state.hpp"
#include "broker/error.hpp"
#include "config/config.hpp"
#include "engines/kind.hpp"

namespace loch::broker {

namespace effect {
struct Grant {};  // a slot: counted, its devices locked where the model takes them alone
struct BookRequestMemory {
};  // the request's own memory (ServeFacts::request_memory) booked beside the engine
struct Wait {
    std::string reason;     // shown with the request in the queue; its queue_timeout's message
    bool for_room = false;  // it waits for memory busy engines hold (broker/turns.cpp gives it a turn)
};
struct Start {
    std::string device;
};
struct StartSplit {
    SplitNeed split;  // its devices, each one's part and share
};
struct Wake {};  // an asleep engine woken where it sleeps, its full reservation booked again
struct Restart {
    std::string why;  // asleep, but it fits elsewhere: stopped, and started there by the next pass
};
struct Evict {
    std::vector<std::string> victims;  // in stop order
    std::string why;
    bool borrowed_from_batch = false;  // a victim was batch work: this model gives the room back once idle
};
struct ReadAhead {
    std::string device;  // the launch on this device names the files
    std::string why;
};
struct Note {
    std::string kind;
    std::string message;
    nlohmann::json extra;
    bool warn = false;
};
struct Refuse {
    Error error;  // the request ends with it; nothing else happens for it
};
}  // namespace effect

using ServeEffect = std::variant<effect::Grant, effect::BookRequestMemory, effect::Wait, effect::Start,
                                 effect::StartSplit, effect::Wake, effect::Restart, effect::Evict,
                                 effect::ReadAhead, effect::Note, effect::Refuse>;
using ServeEffects = std::vector<ServeEffect>;

// What is known without asking: the model, its engine and the request.
// (Views into the broker's model: valid for the decision's call.)
struct ServeFacts {
    std::string_view model;
    ModelState state = ModelState::stopped;
    std::string_view device;  // where it runs, loads, sleeps or last ran
    std::uint32_t slots = 1;
    std::uint32_t active = 0;                                   // requests running on it
    config::Priority priority = config::Priority::interactive;  // the request's
    // Batch work, not yet aged: the person's request it yields to ("'chat' runs an interactive request on
    // cpu"), if any.
    std::optional<std::string> yields_to;
    const engines::RequestCost* request_memory = nullptr;  // its own memory beside the engine's, if any
    std::chrono::duration<double> loading_for{0};          // loading: since when
    std::optional<double> last_load_s;
    std::string_view stop_reason;                    // stopping: why
    std::chrono::steady_clock::duration backoff{0};  // a failure's restart backoff left
    bool planned = false;                            // its footprint is known
    std::string_view footprint_source;               // and where it came from (a refusal names it)
    bool one_model_at_a_time = false;                // the policy (llama-swap's swap)
    bool shutting_down = false;
    std::optional<Error> quarantined;  // its quarantine's refusal, while one holds
};

// What a device adds to a refusal on it: the Vulkan heap's bound and the pool the ROCm build would use,
// and the advice its limits carry (an APU's BIOS setting).
struct DeviceAdvice {
    std::optional<std::uint64_t> vulkan_heap;
    std::uint64_t without_vulkan_heap = 0;
    std::string advice;
};

// The other engines, for one model at a time: idle ones (stopped for it) and busy ones (waited for).
struct OtherEngines {
    std::vector<std::string> idle, busy;
};

// Admission's decision for a start, and what it was decided on (a split's parts, the devices' order).
struct Admitted {
    AdmissionInput input;
    Decision decision;
};

class ServeQuestions {
  public:
    virtual ~ServeQuestions() = default;
    // Ready with a free slot: why it takes no new request now (the CPU's cores, another model's turn).
    virtual std::optional<std::string> turn_wait() = 0;
    // Its devices are not held by another model alone, and, if it takes them alone, no other model runs.
    virtual bool exclusive_ok() = 0;
    virtual std::optional<std::string> exclusive_holder() = 0;  // who holds its device alone, if anyone
    // Its own memory: the refusal when it can never fit beside the engine, whether it fits now, and
    // admission's answer for room otherwise.
    virtual std::optional<Error> request_memory_never_fits() = 0;
    virtual bool request_memory_fits_now() = 0;
    virtual Decision admit_request_memory() = 0;
    virtual std::optional<Error> no_build_reaches() = 0;  // no device's engine build can run it
    virtual OtherEngines other_engines() = 0;
    virtual Admitted admit() = 0;  // an asleep engine's own small reservation is not in its way
    virtual bool evicts_batch_work(const std::vector<std::string>& victims) = 0;
    virtual DeviceAdvice device_advice(const std::string& device) = 0;
};

ServeEffects decide_serve(const ServeFacts& facts, ServeQuestions& ask);

}  // namespace loch::broker
