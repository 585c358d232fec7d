#include "observe/metrics.hpp"

#include <algorithm>
#include <sstream>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <nlohmann/json.hpp>

namespace loch::observe {

namespace {

using prometheus::BuildCounter;
using prometheus::BuildHistogram;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

const prometheus::Histogram::BucketBoundaries kSeconds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                          2.5,   5,    10,    30,   60,  120,  300, 900};
const prometheus::Histogram::BucketBoundaries kTokensPerSecond = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
const prometheus::Histogram::BucketBoundaries kRatio = {0.05, 0.1, 0.25, 0.5, 1, 2, 4, 10};

// A snapshot family being built at scrape time.
struct Snapshot {
    std::vector<MetricFamily> families;
    MetricFamily& family(const std::string& name, const std::string& help, MetricType type) {
        for (auto& f : families)
            if (f.name == name) return f;
        families.push_back(MetricFamily{name, help, type, {}});
        return families.back();
    }
    void gauge(const std::string& name, const std::string& help, std::vector<ClientMetric::Label> labels,
               double v) {
        ClientMetric m;
        std::sort(labels.begin(), labels.end());  // in name order, as prometheus-cpp's own families
        m.label = std::move(labels);
        m.gauge.value = v;
        family(name, help, MetricType::Gauge).metric.push_back(std::move(m));
    }
    void counter(const std::string& name, const std::string& help, std::vector<ClientMetric::Label> labels,
                 double v) {
        ClientMetric m;
        std::sort(labels.begin(), labels.end());  // in name order, as prometheus-cpp's own families
        m.label = std::move(labels);
        m.counter.value = v;
        family(name, help, MetricType::Counter).metric.push_back(std::move(m));
    }
    void summary(const std::string& name, const std::string& help, std::vector<ClientMetric::Label> labels,
                 std::uint64_t count, double sum) {
        ClientMetric m;
        std::sort(labels.begin(), labels.end());  // in name order, as prometheus-cpp's own families
        m.label = std::move(labels);
        m.summary.sample_count = count;
        m.summary.sample_sum = sum;
        family(name, help, MetricType::Summary).metric.push_back(std::move(m));
    }
};

std::uint64_t u64(const nlohmann::json& j, const char* key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<std::uint64_t>() : 0;
}

void add_devices(Snapshot& s, const nlohmann::json& devices) {
    for (const auto& d : devices) {
        const std::string dev = d.value("device", "");
        const auto figure = [&](const char* key) {
            return d.contains(key) && d[key].is_object() ? d[key].value("bytes", std::uint64_t{0}) : 0;
        };
        const std::pair<const char*, double> parts[] = {
            {"total", double(figure("total"))},
            {"reserve", double(figure("reserve"))},
            {"driver_reserved", double(figure("driver_reserved"))},
            {"capacity", double(u64(d, "capacity_bytes"))},
            {"outside", double(u64(d, "outside_bytes"))},
            {"loch", double(u64(d, "own_bytes"))},
            {"free", double(u64(d, "free_bytes"))}};
        s.gauge("loch_device_memory_free_bytes",
                "Memory a new engine could take on the device now (for an endpoint picker's scorer)",
                {{"device", dev}}, double(u64(d, "free_bytes")));
        for (const auto& [what, v] : parts)
            s.gauge(
                "loch_device_memory_bytes",
                "Device memory by part: total, reserve, driver_reserved, capacity (what loch may ever use), "
                "outside (other programs), loch (its reservations), free",
                {{"device", dev}, {"part", what}}, v);
        for (const auto& r : d.value("reservations", nlohmann::json::array())) {
            const auto& f = r["figure"];
            s.gauge("loch_reservation_bytes",
                    "Each engine's reservation on a device, with the figure's source",
                    {{"device", dev},
                     {"model", r.value("engine", "")},
                     {"source", f.value("source", "")},
                     {"loading", r.value("loading", false) ? "true" : "false"}},
                    double(f.value("bytes", std::uint64_t{0})));
        }
    }
}

// The box as one vLLM server, for an endpoint picker (llm-d's EPP, the Gateway API Inference Extension's
// model-server protocol): one series per name, never one per model (a scraper that finds several reads one
// of them at random). Models are published as LoRA adapters: resident ones as running, loading ones as
// waiting, and max_lora as the resident count plus how many more would start here now.
struct BoxFigures {
    double running = 0, waiting = 0, ready_slots = 0, ready_running = 0;
    std::vector<std::string> resident, loading;
    std::size_t would_fit_now = 0;
};

void add_box(Snapshot& s, const BoxFigures& box) {
    s.gauge("vllm:num_requests_running", "Requests running on this box's engines (vLLM's name)", {},
            box.running);
    s.gauge("vllm:num_requests_waiting", "Requests waiting in loch's queues on this box (vLLM's name)", {},
            box.waiting);
    const double kv = box.ready_slots > 0 ? box.ready_running / box.ready_slots : 0;
    s.gauge("vllm:kv_cache_usage_perc", "KV-cache usage 0-1: the share of the ready engines' slots in use",
            {}, kv);
    s.gauge("vllm:gpu_cache_usage_perc", "KV-cache usage 0-1 (the older vLLM name)", {}, kv);
    const auto joined = [](const std::vector<std::string>& names) {
        std::string out;
        for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
        return out;
    };
    s.gauge("vllm:lora_requests_info",
            "Models as LoRA adapters: running = resident, waiting = loading, max_lora = resident + how many "
            "more would start now; the value is the time of the snapshot (vLLM's convention)",
            {{"running_lora_adapters", joined(box.resident)},
             {"waiting_lora_adapters", joined(box.loading)},
             {"max_lora", std::to_string(box.resident.size() + box.would_fit_now)}},
            double(std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count()));
}

void add_models(Snapshot& s, const nlohmann::json& status) {
    BoxFigures box;
    std::map<std::string, std::uint64_t> waiting;
    if (status.contains("queue"))
        for (const auto& w : status["queue"].value("waiting", nlohmann::json::array()))
            ++waiting[w.value("model", "")];
    for (const auto& [model, n] : waiting) box.waiting += double(n);
    static const char* kStates[] = {"stopped", "loading", "ready", "stopping"};
    for (const auto& e : status.value("engines", nlohmann::json::array())) {
        const std::string model = e.value("name", "");
        const std::string state = e.value("state", "");
        for (const char* st : kStates)
            s.gauge("loch_model_state", "1 for the state the model is in", {{"model", model}, {"state", st}},
                    state == st ? 1 : 0);
        const double running = double(u64(e, "active_requests"));
        const double slots = std::max<double>(1, double(u64(e, "slots")));
        s.gauge("loch_model_requests_running", "Requests running on the model's engine", {{"model", model}},
                running);
        s.gauge("loch_model_requests_waiting", "Requests waiting in loch's queue for the model",
                {{"model", model}}, double(waiting[model]));
        s.gauge("loch_model_slot_usage_ratio", "The share 0-1 of the model's slots in use",
                {{"model", model}}, state == "ready" ? running / slots : 0);
        box.running += running;
        if (state == "ready") {
            box.ready_slots += slots;
            box.ready_running += running;
        }
        if (state == "ready" || state == "asleep")
            box.resident.push_back(model);
        else if (state == "loading")
            box.loading.push_back(model);
        else if (e.value("fits_now", false))
            ++box.would_fit_now;
        if (!e.contains("counters")) continue;
        const auto& c = e["counters"];
        s.counter("loch_engine_loads_total", "Engine starts by outcome",
                  {{"model", model}, {"outcome", "ready"}}, double(u64(c, "loads_ok")));
        s.counter("loch_engine_loads_total", "Engine starts by outcome",
                  {{"model", model}, {"outcome", "failed"}}, double(u64(c, "loads_failed")));
        s.summary("loch_engine_load_seconds", "Time from spawn to ready of the loads that succeeded",
                  {{"model", model}}, u64(c, "loads_ok"), c.value("load_seconds_total", 0.0));
        s.counter("loch_engine_evictions_total", "Times the model was stopped to make room for another",
                  {{"model", model}}, double(u64(c, "evictions")));
        for (const char* outcome : {"ok", "failed"})
            s.counter("loch_slot_restores_total",
                      "Saved conversations restored into a slot, by whether the first answer reused them",
                      {{"model", model}, {"outcome", outcome}},
                      double(u64(c, (std::string("slot_restores_") + outcome).c_str())));
        const auto exits =
            c.value("exits", nlohmann::json::object());  // (items() of a temporary would dangle)
        for (const auto& [exit_class, n] : exits.items())
            s.counter("loch_engine_exits_total",
                      "Engine exits by exit class (clean, signal, out_of_memory, …)",
                      {{"model", model}, {"exit_class", exit_class}}, n.get<double>());
    }
    add_box(s, box);
}

const std::string kNoModel = "-";

}  // namespace

// The series of one model + route + outcome (and the model's own), found once: a Family::Add builds and
// hashes its label map on every call, which the request path should not pay for every time.
struct Metrics::Series {
    prometheus::Counter* requests;
    prometheus::Histogram* duration;
    prometheus::Histogram* queue_wait;  // nullptr without a priority
    prometheus::Histogram* ttft;
    prometheus::Counter* prompt_tokens;
    prometheus::Counter* generated_tokens;
    prometheus::Histogram* tokens_per_second;
    prometheus::Histogram* seconds_per_step;
    prometheus::Histogram* real_time_factor;
};

struct Metrics::Families {
    std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
    prometheus::Family<prometheus::Counter>& requests =
        BuildCounter()
            .Name("loch_requests_total")
            .Help("Model requests by model, route and outcome")
            .Register(*registry);
    prometheus::Family<prometheus::Histogram>& duration =
        BuildHistogram()
            .Name("loch_request_duration_seconds")
            .Help("Arrival to last byte, queue wait included")
            .Register(*registry);
    prometheus::Family<prometheus::Histogram>& ttft = BuildHistogram()
                                                          .Name("loch_time_to_first_token_seconds")
                                                          .Help("Arrival to the first streamed event")
                                                          .Register(*registry);
    prometheus::Family<prometheus::Counter>& prompt_tokens = BuildCounter()
                                                                 .Name("loch_prompt_tokens_total")
                                                                 .Help("Prompt tokens the engines reported")
                                                                 .Register(*registry);
    prometheus::Family<prometheus::Counter>& generated_tokens =
        BuildCounter()
            .Name("loch_generated_tokens_total")
            .Help("Generated tokens the engines reported")
            .Register(*registry);
    prometheus::Family<prometheus::Histogram>& tokens_per_second =
        BuildHistogram()
            .Name("loch_generation_tokens_per_second")
            .Help("Generated tokens per second after the first, per request")
            .Register(*registry);
    prometheus::Family<prometheus::Histogram>& queue_wait =
        BuildHistogram()
            .Name("loch_queue_wait_seconds")
            .Help("Time a request waited for its slot, by priority class")
            .Register(*registry);
    prometheus::Family<prometheus::Histogram>& seconds_per_step =
        BuildHistogram()
            .Name("loch_image_seconds_per_step")
            .Help("Seconds per sampling step of image requests")
            .Register(*registry);
    prometheus::Family<prometheus::Histogram>& loop_lag_family =
        BuildHistogram()
            .Name("loch_event_loop_lag_seconds")
            .Help("How late loch's event loop woke a periodic timer: every request waits as long")
            .Register(*registry);
    prometheus::Histogram& loop_lag =
        loop_lag_family.Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                                        0.25, 0.5, 1, 2.5, 5, 10});
    prometheus::Family<prometheus::Histogram>& real_time_factor =
        BuildHistogram()
            .Name("loch_audio_real_time_factor")
            .Help("Processing time / audio duration of speech requests")
            .Register(*registry);
};

Metrics::Metrics() : f_(std::make_unique<Families>()) {}
Metrics::~Metrics() = default;

void Metrics::record(const RequestRecord& r) {
    // A name no model has is not a label value: clients could make the series unbounded.
    const std::string& model = r.model.empty() || r.error_type == "model_not_found" ? kNoModel : r.model;
    const std::string outcome = r.outcome();
    const std::tuple<std::string_view, std::string_view, std::string_view, std::string_view> key{
        model, r.route, outcome, r.priority};
    auto it = series_.find(key);
    if (it == series_.end()) {
        Series s{&f_->requests.Add({{"model", model}, {"route", r.route}, {"outcome", outcome}}),
                 &f_->duration.Add({{"model", model}, {"route", r.route}}, kSeconds),
                 r.priority.empty() ? nullptr : &f_->queue_wait.Add({{"priority", r.priority}}, kSeconds),
                 &f_->ttft.Add({{"model", model}}, kSeconds),
                 &f_->prompt_tokens.Add({{"model", model}}),
                 &f_->generated_tokens.Add({{"model", model}}),
                 &f_->tokens_per_second.Add({{"model", model}}, kTokensPerSecond),
                 &f_->seconds_per_step.Add({{"model", model}}, kSeconds),
                 &f_->real_time_factor.Add({{"model", model}}, kRatio)};
        it = series_.emplace(SeriesKey{model, r.route, outcome, r.priority}, s).first;
    }
    const Series& s0 = it->second;
    s0.requests->Increment();
    s0.duration->Observe(r.duration_s);
    if (s0.queue_wait) s0.queue_wait->Observe(r.queue_wait_s);
    if (r.ttft_s) s0.ttft->Observe(*r.ttft_s);
    if (r.prompt_tokens) s0.prompt_tokens->Increment(double(*r.prompt_tokens));
    if (r.completion_tokens) s0.generated_tokens->Increment(double(*r.completion_tokens));
    if (auto tps = r.tokens_per_second()) s0.tokens_per_second->Observe(*tps);
    if (r.seconds_per_step) s0.seconds_per_step->Observe(*r.seconds_per_step);
    if (r.real_time_factor) s0.real_time_factor->Observe(*r.real_time_factor);
    auto& s = speed_[model];
    ++s.count;
    if (!r.error_type.empty()) ++s.errors;
    if (r.ttft_s) s.ttft_sum += *r.ttft_s, ++s.ttft_n;
    if (r.ttft_s && r.priority != "batch") ttft_history_.record(std::chrono::steady_clock::now(), *r.ttft_s);
    if (auto tps = r.tokens_per_second()) s.tps_sum += *tps, ++s.tps_n, s.last_tps = *tps;
    // Image and speech engines have no tokens: their speed is seconds per step and the real-time factor.
    if (r.seconds_per_step) s.step_sum += *r.seconds_per_step, ++s.step_n;
    if (r.real_time_factor) s.rtf_sum += *r.real_time_factor, ++s.rtf_n;
    s.duration_sum += r.duration_s;
}

void Metrics::observe_loop_lag(double seconds) {
    f_->loop_lag.Observe(seconds);
}

nlohmann::json Metrics::summary() const {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [model, s] : speed_) {
        nlohmann::json j = {{"count", s.count}, {"errors", s.errors}};
        if (s.ttft_n) j["ttft_s_avg"] = s.ttft_sum / double(s.ttft_n);
        if (s.tps_n) {
            j["tokens_per_s_avg"] = s.tps_sum / double(s.tps_n);
            j["tokens_per_s_last"] = s.last_tps;
        }
        if (s.step_n) j["seconds_per_step_avg"] = s.step_sum / double(s.step_n);
        if (s.rtf_n) j["real_time_factor_avg"] = s.rtf_sum / double(s.rtf_n);
        if (s.count) j["duration_s_avg"] = s.duration_sum / double(s.count);
        out[model] = std::move(j);
    }
    return out;
}

nlohmann::json Metrics::ttft_history() const {
    return ttft_history_.to_json(std::chrono::steady_clock::now());
}

std::string Metrics::exposition(const nlohmann::json& status) const {
    auto families = f_->registry->Collect();
    Snapshot s;
    if (status.contains("devices")) add_devices(s, status["devices"]);
    add_models(s, status);
    if (status.contains("queue")) {
        const auto& q = status["queue"];
        for (const char* cls : {"interactive", "batch"})
            s.gauge("loch_queue_depth", "Requests waiting, by priority class", {{"priority", cls}},
                    double(u64(q, cls)));
    }
    if (const auto it = status.find("event_loop"); it != status.end() && it->is_object()) {
        s.gauge("loch_event_loop_lag_last_seconds", "The event loop's lag at its last sample", {},
                it->value("lag_s", 0.0));
        s.gauge("loch_event_loop_lag_max_seconds", "The event loop's highest lag since loch started", {},
                it->value("max_lag_s", 0.0));
    }
    if (const auto it = status.find("connections"); it != status.end() && it->is_object()) {
        s.gauge("loch_client_connections", "Open client connections", {}, double(it->value("open", 0)));
        s.counter("loch_client_connections_idle_closed_total",
                  "Idle keep-alive connections closed to make room at max_connections", {},
                  double(it->value("idle_closed_at_cap", 0)));
    }
    // The Batch API's unfinished batches (a series per batch while it runs; none once it has ended).
    if (const auto it = status.find("batches"); it != status.end() && it->is_array())
        for (const auto& b : *it) {
            const std::string id = b.value("id", "");
            for (const char* st : {"queued", "running", "done", "failed"})
                s.gauge("loch_batch_items", "Items of each unfinished Batch API batch, by state",
                        {{"batch", id}, {"state", st}}, double(b.value(st, 0)));
            s.counter("loch_batch_items_preempted_total",
                      "Running batch items preempted for interactive requests (each ran again)",
                      {{"batch", id}}, double(b.value("preempted", 0)));
            s.gauge("loch_batch_items_per_minute", "A batch's throughput over the last 5 minutes",
                    {{"batch", id}}, b.value("items_per_minute", 0.0));
            if (b.contains("eta_s") && b["eta_s"].is_number())
                s.gauge("loch_batch_eta_seconds", "When a batch is expected to end, from its measured items",
                        {{"batch", id}}, b["eta_s"].get<double>());
        }
    for (auto& f : s.families) families.push_back(std::move(f));
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, families);
    return out.str();
}

}  // namespace loch::observe
