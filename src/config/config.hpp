// config/config — one YAML file (loch.yaml) → validated structs, or an error that says file:line:column
// and what is wrong.
//
// Rules (docs/config.md documents every key):
// - Unknown keys are errors: a typo must never be silently ignored. Duplicate keys in one mapping too.
// - Every value is type- and range-checked; sizes accept bytes or "512MiB" / "24GiB" / "1.5GB"; durations
//   accept seconds or "90s" / "5m" / "1h".
// - Model names and aliases are checked against a safe charset and are never used as paths; names and
//   aliases share one namespace (no duplicates, not even differing only by case).
// - Relative paths resolve against the config file's folder (models_dir, state_dir, log_dir, engine_dir),
//   and a model's `path` against models_dir. Model files are checked to exist (and by the model's kind:
//   llama-server's must start with the GGUF magic).
// - Engine kinds parse their own keys (config/kind_schema.hpp); this module names none of them.
// - All problems found are reported at once (ConfigError carries a list), each with its position.
//
// The embedded default (`loch serve` without --config): every *.gguf in a models folder (default
// ./models), served by the default kind (LoadContext::kinds.front(): the pinned llama-server, found next
// to the loch executable, then on PATH).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/engine_builds.hpp"

namespace loch::config {

namespace fs = std::filesystem;
using Seconds = std::chrono::seconds;

// ---------------------------------------------------------------------------------------------------------
// Errors

// One problem in the configuration. line/column are 1-based; 0 when there is no position (e.g. a problem
// with the models folder of the embedded default).
struct Diagnostic {
    std::string file;
    int line = 0;
    int column = 0;
    std::string key;      // dotted path of the offending key: "models[2].args.ctx" (empty for syntax errors)
    std::string message;  // what is wrong, with the offending value: "expected a positive integer, got 'abc'"

    // "loch.yaml:12:5: models[2].args.ctx: expected a positive integer, got 'abc'"
    std::string to_string() const;
};

// Thrown by the loaders. what() is every diagnostic's to_string(), one per line.
class ConfigError : public std::runtime_error {
  public:
    explicit ConfigError(std::vector<Diagnostic> diagnostics);
    const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

  private:
    std::vector<Diagnostic> diagnostics_;
};

// ---------------------------------------------------------------------------------------------------------
// Per model

enum class Priority {
    interactive,  // served first
    batch,        // served after interactive, but aging keeps it from starving
};
std::string_view to_string(Priority p);

struct KindSettings;  // config/kind_schema.hpp: a kind's own keys, parsed by the kind
class KindSchema;

struct ModelConfig {
    std::string name;                  // what clients send as "model"
    std::vector<std::string> aliases;  // other accepted names
    std::string engine;  // the engine kind's name (engines/kinds/registry.cpp); empty = the default kind
    std::shared_ptr<const KindSettings> settings;  // its kind's keys (`args:`, `command:` …), by its schema
    fs::path path;  // absolute after loading; empty only where the kind does not need one

    std::vector<std::string> devices;  // allowed device ids (as `loch devices` prints them); empty = any
    bool cpu_fallback = false;         // may run on the CPU when no allowed device fits (default: strict)
    Priority priority = Priority::interactive;
    std::optional<Seconds> keep_alive =
        Seconds{300};               // idle time before it may be stopped; nullopt = forever
    bool pinned = false;            // never evicted (still stopped on shutdown)
    std::uint32_t concurrency = 0;  // requests sent to the engine at once; 0 = the kind's (llama: parallel)
    Seconds startup_timeout{3600};  // spawn → healthy; generous: ROCm first runs compile kernels 30+ min
    std::optional<Seconds> watchdog = Seconds{120};  // abort a request after N s without upstream bytes
    bool exclusive = false;                          // takes a per-device GPU lock while it runs
    // `memory:` what the engine needs per device id ("*" = every device), for kinds loch cannot plan
    // (command engines); Source::configured.
    std::map<std::string, std::uint64_t> memory;
    std::optional<std::uint64_t> memory_on(std::string_view device) const {
        if (auto it = memory.find(std::string(device)); it != memory.end()) return it->second;
        if (auto it = memory.find("*"); it != memory.end()) return it->second;
        return std::nullopt;
    }

    // Source position of this model's entry (for messages that refer back to the file).
    std::string file;
    int line = 0;

    // What its file said when the config was loaded (KindSchema::describe_file); null where files were not
    // checked (fuzzing, entries built by hand).
    std::shared_ptr<const nlohmann::json> file_facts;
};

// ---------------------------------------------------------------------------------------------------------
// Per device (`devices:` mapping keyed by the ids `loch devices` prints: cpu, nvidia:0, amd:card0, …)

struct DeviceConfig {
    std::string id;
    std::uint64_t reserve = 0;            // bytes always left free for everything outside loch
    std::optional<std::uint64_t> budget;  // cap on what loch's engines may use on this device
    std::uint64_t margin = 0;             // added to every engine's planned footprint on this device
    int line = 0;
    // The engine build that runs here when it is not the vendor's own (a Vulkan llama.cpp / sd.cpp on an
    // AMD APU): Vulkan allocates from the DEVICE_LOCAL heap, which bounds what it can hold.
    std::optional<std::string> backend;
};

// ---------------------------------------------------------------------------------------------------------
// Global

struct QueueLimits {
    // Waiting requests per priority class; beyond → 503 + Retry-After. A waiting request costs a coroutine
    // and its socket; the bound is for a runaway client, not for a batch job or a benchmark that opens a
    // thousand streams at once (issue 9), which should wait, not be refused.
    std::uint32_t interactive = 1024;
    std::uint32_t batch = 4096;
};

// Restart/backoff/quarantine policy for crashing engines (engines/restart.hpp applies it).
struct RestartConfig {
    std::uint32_t max_crashes = 3;  // crashes within `window` that quarantine a model
    Seconds window{600};
    Seconds backoff_initial{1};  // delay before the first restart, doubled per crash up to backoff_max
    Seconds backoff_max{60};
    Seconds quarantine{900};  // how long a quarantined model refuses requests
};

// Conversations that survive an eviction (docs/conversations.md): before loch stops a llama-server engine to
// make room, for idleness or on request, the engine saves each slot's KV state to a file under
// <state_dir>/slots; a later request that continues one of those conversations gets its file restored into
// a slot of the restarted engine instead of re-reading the whole prompt.
struct SlotSaveConfig {
    bool enabled = true;
    std::uint64_t max_disk = std::uint64_t{16} << 30;  // all saved slots together; the oldest go first
    std::uint32_t min_tokens = 512;  // a slot holding fewer is re-read faster than its file is written
};

// How long loch waits on a client connection (http/server.hpp has the rules).
// The Responses API's stored responses (responses/store.hpp): kept this long, and at most this much.
struct StoredResponses {
    Seconds max_age{30 * 24 * 3600};
    std::uint64_t max_bytes = std::uint64_t{1} << 30;
};

struct ClientTimeouts {
    Seconds idle{30};    // keep-alive connection without a request
    Seconds header{10};  // first byte of a request → its whole header
    Seconds body{60};    // header → the whole body
};

// HAProxy's agent-check (docs/several-boxes.md): one line in (a model), one line out (how it fits here).
// Off unless the file has an `agent:` section.
struct AgentConfig {
    std::string listen = "127.0.0.1";
    std::uint16_t port = 8081;
};

struct Config {
    std::string source;  // the file name, or "<embedded default>"
    std::string listen = "127.0.0.1";
    std::uint16_t port = 8080;
    std::vector<std::string> api_keys;         // empty = no authentication (fine on localhost only)
    std::optional<AgentConfig> agent;          // HAProxy's agent-check port; none = off
    fs::path models_dir;                       // absolute
    fs::path state_dir;                        // absolute: engine state file (stale cleanup) and lock
    fs::path log_dir;                          // absolute: one log file per engine
    fs::path engine_dir;                       // absolute: where engine programs are looked for first
    std::map<std::string, fs::path> programs;  // kind → its resolved program (only kinds a model uses)
    // kind → every build of its program found, by backend (config/engine_builds.hpp); a kind listed in
    // `programs` but not here has one build of unknown backend: that program.
    std::map<std::string, std::vector<EngineBuild>> builds;
    QueueLimits queue;
    std::uint64_t max_body_bytes = 16 * 1024 * 1024;  // request body size limit
    // A Batch API input file (POST /v1/files): streamed to disk, never held in memory.
    std::uint64_t max_batch_file_bytes = std::uint64_t{2} << 30;
    StoredResponses responses;
    // A batch's items in flight per model at once; 0 = the model's slots (docs/batches.md).
    std::uint32_t batch_concurrency = 0;
    ClientTimeouts client_timeouts;
    std::uint32_t max_connections = 1024;  // open client connections; beyond → 503 too_many_connections
    Seconds max_wait{300};                 // longest a request may wait in a queue before 503
    Seconds stop_grace{10};                // SIGTERM → SIGKILL
    RestartConfig restart;
    SlotSaveConfig slot_save;
    // A model whose start waits (evictions draining, a busy device) has its files read into the page cache
    // meanwhile, where host memory allows (broker/file_cache.hpp).
    bool read_ahead = true;
    std::map<std::string, DeviceConfig> devices;
    std::vector<ModelConfig> models;
    std::vector<std::string> notes;  // things worth telling the user that are not errors (skipped files)

    // By name or alias (exact match; "<name>:latest" finds <name>, as Ollama's clients ask); nullptr when
    // unknown.
    const ModelConfig* find_model(std::string_view name_or_alias) const;
    // Device settings for `id`, or defaults (no reserve, no budget, no margin).
    DeviceConfig device(std::string_view id) const;
    // The resolved program of a kind; empty when none was resolved.
    fs::path program(std::string_view kind) const {
        auto it = programs.find(std::string(kind));
        return it == programs.end() ? fs::path() : it->second;
    }
    // The program of `kind` that reaches `backend` ("cpu", "cuda", "rocm", "vulkan"): that backend's build,
    // else one of unknown backend; empty when no build reaches it.
    fs::path program(std::string_view kind, std::string_view backend) const;
    // Whether an engine of `kind` can run on a device of `backend`: a kind without a program (the command
    // kind) always can.
    bool reaches(std::string_view kind, std::string_view backend) const;
    // The builds of `kind`, as program(kind, backend) chooses among them.
    std::vector<EngineBuild> builds_of(std::string_view kind) const;
    // The backend engines use on a device: `devices.<id>.backend` where the config says, else the first of
    // `candidates` (the device's backends, best first) that some engine was built for, else the first.
    std::string backend_for(std::string_view device, const std::vector<std::string>& candidates) const;
};

// ---------------------------------------------------------------------------------------------------------
// Loading

// Everything the loader would otherwise take from the process: makes loading deterministic in tests.
struct LoadContext {
    fs::path cwd;                     // relative paths of the embedded default resolve here
    fs::path exe_dir;                 // folder of the loch executable (/proc/self/exe)
    std::vector<fs::path> path_dirs;  // $PATH split
    fs::path default_state_dir;       // $XDG_STATE_HOME/loch or ~/.local/state/loch or <cwd>/.loch
    fs::path home;                    // $HOME, for "~/..." paths in the file (empty: "~" is not expanded)
    bool check_files = true;          // check model paths and binaries (fuzzing turns it off)
    // The engine kinds' schemas, the default kind first (engines::kind_schemas()); must outlive the load.
    std::vector<const KindSchema*> kinds;

    static LoadContext from_process();
};

// Parse and validate YAML text; `file_name` is used in diagnostics and relative paths resolve against
// its parent folder. Throws ConfigError.
Config parse_config(std::string_view yaml, const fs::path& file_name, const LoadContext& ctx);

// Read and parse a file. Throws ConfigError (also for an unreadable file).
Config load_config_file(const fs::path& file, const LoadContext& ctx);

// The embedded default: every *.gguf directly in models_dir (not in subfolders) served by
// the default kind with default settings; model name = sanitized file stem. Later split parts
// (name-00002-of-00003.gguf) and mmproj-*.gguf projectors are skipped (listed in notes). `models_dir`
// empty = <cwd>/models. Throws ConfigError when models_dir does not exist or the kind's program is not found.
Config default_config(const LoadContext& ctx, const fs::path& models_dir = {});

// The embedded default's settings as YAML (what `loch serve` without a file behaves like; for docs and
// `loch serve --print-default-config`).
std::string_view embedded_default_yaml();

// ---------------------------------------------------------------------------------------------------------
// Small parsers, exposed for reuse and tests

// "512MiB", "24GiB", "1.5GB", "4096", "0" → bytes. nullopt (with `why`) on bad input or overflow.
std::optional<std::uint64_t> parse_size(std::string_view text, std::string* why = nullptr);
// "90", "90s", "5m", "1h", "1h30m" → seconds.
std::optional<Seconds> parse_duration(std::string_view text, std::string* why = nullptr);

// Model names: 1–128 chars of [A-Za-z0-9._:+-], starting with a letter or digit. Aliases additionally
// allow '/' (clients send "org/model"), but not "//", a leading/trailing '/', or ".." segments.
bool valid_model_name(std::string_view name);
// Why `id` cannot be a device id, or nullopt: cpu, nvidia:N, amd:cardN (what the probes produce). A name that
// no probe produces (cuda:0) would pass every check and then leave its model nothing to run on.
std::optional<std::string> device_id_problem(std::string_view id);
bool valid_model_alias(std::string_view alias);
// A file stem → a valid model name (invalid characters become '-'); empty if nothing usable remains.
std::string sanitize_model_name(std::string_view stem);

// Finds `program` in `dirs` in order (regular, executable file); nullopt if none.
std::optional<fs::path> find_executable(std::string_view program, const std::vector<fs::path>& dirs);

}  // namespace loch::config
