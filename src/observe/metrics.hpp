// observe/metrics — loch's Prometheus metrics (text exposition format 0.0.4, written by prometheus-cpp's
// TextSerializer; never formatted by hand).
//
// Two kinds of series:
//   - per request, counted as requests finish (record()): loch_requests_total{model,route,outcome},
//     loch_request_duration_seconds, loch_time_to_first_token_seconds, loch_prompt_tokens_total,
//     loch_generated_tokens_total, loch_generation_tokens_per_second, loch_queue_wait_seconds{priority},
//     loch_image_seconds_per_step, loch_audio_real_time_factor;
//   - a snapshot of the broker's state at scrape time (exposition(status)): ledger bytes per device by holder
//     and source, device capacity/free/outside, queue depth per class, model state, engine loads / exits by
//     exit class / evictions (cumulative counters the broker keeps), load seconds, and per model the gauges
//     the Kubernetes Gateway API Inference Extension reads, under vLLM's names: vllm:num_requests_waiting,
//     vllm:num_requests_running, vllm:kv_cache_usage_perc (and vllm:gpu_cache_usage_perc, its older name).
//     KV-cache usage is the share of the model's slots running a request: each llama-server slot owns
//     ctx ÷ parallel of the cache.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include <nlohmann/json_fwd.hpp>

#include "observe/request_record.hpp"
#include "observe/ttft_history.hpp"

namespace loch::observe {

class Metrics {
  public:
    Metrics();
    ~Metrics();
    Metrics(const Metrics&) = delete;
    Metrics& operator=(const Metrics&) = delete;

    void record(const RequestRecord& r);
    // One sample of the event loop's lag (observe/loop_lag.hpp): loch_event_loop_lag_seconds.
    void observe_loop_lag(double seconds);
    // The whole exposition: the request series and the snapshot of `status` (Broker::status()).
    std::string exposition(const nlohmann::json& status) const;
    // Per model, for /loch/status and the dashboard: requests, errors, average TTFT and tokens/s.
    nlohmann::json summary() const;
    // People's (interactive requests') time to first token per minute over the last hour, for the dashboard.
    nlohmann::json ttft_history() const;

  private:
    struct Families;
    std::unique_ptr<Families> f_;
    struct Series;
    // By model, route, outcome, priority; looked up by views (no key built per request).
    using SeriesKey = std::tuple<std::string, std::string, std::string, std::string>;
    std::map<SeriesKey, Series, std::less<>> series_;
    struct Speed {
        std::uint64_t count = 0, errors = 0, ttft_n = 0, tps_n = 0, step_n = 0, rtf_n = 0;
        double ttft_sum = 0, tps_sum = 0, last_tps = 0, step_sum = 0, rtf_sum = 0, duration_sum = 0;
    };
    std::map<std::string, Speed> speed_;
    TtftHistory ttft_history_;
};

}  // namespace loch::observe
