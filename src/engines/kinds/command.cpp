// The command kind: argv template, device visibility, configured or file-size footprint.
#include "engines/kinds/command.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <stdexcept>

#include "core/memory.hpp"

namespace loch::engines {

const std::vector<std::string>& command_placeholders() {
    static const std::vector<std::string> names{"host", "port",     "model_path", "model_name",
                                                "ctx",  "parallel", "threads"};
    return names;
}

std::string expand_placeholders(std::string_view t, const std::map<std::string, std::string>& values) {
    std::string out;
    for (std::size_t i = 0; i < t.size(); ++i) {
        const char c = t[i];
        if ((c == '{' || c == '}') && i + 1 < t.size() && t[i + 1] == c) {
            out += c;
            ++i;
            continue;
        }
        if (c == '}')
            throw std::invalid_argument("unmatched '}' in '" + std::string(t) +
                                        "' (write '}}' for a literal brace)");
        if (c != '{') {
            out += c;
            continue;
        }
        const auto close = t.find('}', i);
        if (close == std::string_view::npos)
            throw std::invalid_argument("unclosed '{' in '" + std::string(t) + "'");
        const std::string name(t.substr(i + 1, close - i - 1));
        const auto it = values.find(name);
        if (it == values.end())
            throw std::invalid_argument("unknown placeholder {" + name + "} in '" + std::string(t) +
                                        "' (known: {" +
                                        [] {
                                            std::string k;
                                            for (const auto& n : command_placeholders())
                                                k += (k.empty() ? "" : "} {") + n;
                                            return k;
                                        }() +
                                        "})");
        out += it->second;
        i = close;
    }
    return out;
}

const CommandSettings& command_settings(const config::ModelConfig& model) {
    return config::settings_as<CommandSettings>(model);
}

namespace {

// The model routes a command server may be given (loch's route table, http/routes.cpp).
constexpr std::string_view kModelRoutes[] = {
    "/v1/chat/completions",   "/v1/completions",  "/v1/embeddings",
    "/v1/images/generations", "/v1/images/edits", "/v1/audio/transcriptions",
    "/v1/audio/translations", "/v1/audio/speech", "/sdapi/v1/txt2img"};

}  // namespace

bool CommandKind::serves(const config::ModelConfig& model, std::string_view route) const {
    const auto& routes = command_settings(model).routes;
    if (routes.empty()) return Kind::serves(model, route);
    return std::find(routes.begin(), routes.end(), route) != routes.end();
}

std::uint32_t CommandKind::slots(const config::ModelConfig& model) const {
    return std::max<std::uint32_t>(
        1, model.concurrency != 0 ? model.concurrency : command_settings(model).parallel);
}

std::vector<std::string> command_argv(const config::ModelConfig& model, std::uint16_t port) {
    const auto& c = command_settings(model);
    const std::map<std::string, std::string> values{
        {"host", "127.0.0.1"},
        {"port", std::to_string(port)},
        {"model_path", model.path.string()},
        {"model_name", model.name},
        {"ctx", std::to_string(c.ctx)},
        {"parallel", std::to_string(c.parallel)},
        {"threads", c.threads ? std::to_string(*c.threads) : std::string()},
    };
    std::vector<std::string> argv;
    for (const auto& t : c.argv) argv.push_back(expand_placeholders(t, values));
    if (argv.empty()) throw std::invalid_argument("model '" + model.name + "': empty command argv");
    return argv;
}

EngineSpec CommandKind::launch(const config::Config& cfg, const config::ModelConfig& model,
                               const Placement& where, std::uint16_t port) const {
    EngineSpec s = base_spec(cfg, model, port);
    s.kind = std::string(name());
    s.argv = command_argv(model, port);
    s.health_path = command_settings(model).health_path;  // empty: ready when the port accepts a connection
    s.env = device_environment(where, true);
    for (const auto& [k, v] : command_settings(model).env) s.env.insert_or_assign(k, v);
    s.env["LOCH_ENGINE_API_KEY"] = s.api_key;
    return s;
}

namespace {

// A file's size, or every regular file's under a folder (a model folder of safetensors shards).
std::uint64_t files_size(const std::filesystem::path& p) {
    std::error_code ec;
    if (p.empty()) return 0;
    if (!std::filesystem::is_directory(p, ec)) {
        const auto n = std::filesystem::file_size(p, ec);
        return ec ? 0 : n;
    }
    std::uint64_t total = 0;
    for (auto it = std::filesystem::recursive_directory_iterator(p, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec)) total += it->file_size(ec);
    return total;
}

}  // namespace

Footprint CommandKind::formula(const config::Config& cfg, const config::ModelConfig& model,
                               const std::vector<Placement>& devices) const {
    Footprint fp;
    const std::uint64_t size = files_size(model.path);
    bool any_configured = false;
    for (const auto& d : devices) {
        Need n;
        n.device = d.device;
        n.ctx = command_settings(model).ctx;
        n.slots = command_settings(model).parallel;
        if (auto m = model.memory_on(d.device)) {
            n.bytes = *m;
            n.source = Source::configured;
            n.why = "configured memory for " + d.device;
            any_configured = true;
        } else {
            n.bytes = size;
            n.weights_bytes = size;
            n.why = "size of the model's files (no `memory:` for " + d.device + ")";
        }
        n.bytes += cfg.device(d.device).margin;
        fp.needs.push_back(n);
    }
    fp.source = any_configured ? Source::configured : Source::formula;
    fp.detail = any_configured ? "configured memory" : "model files " + human_bytes(size) + " (no `memory:`)";
    return fp;
}

config::Walker::Keys CommandKind::keys(config::Walker& w, config::KindSettings& into) const {
    auto& c = dynamic_cast<CommandSettings&>(into);
    return {
        {"command", [&w, &c](auto&, auto& node, auto& path) {
             w.walk(
                 node, path,
                 {
                     {"argv",
                      [&](auto&, auto& v, auto& k) {
                          auto xs = w.str_list(v, k);
                          if (!xs) return;
                          if (xs->empty()) {
                              w.error(v, k, "must name at least the program");
                              return;
                          }
                          // Checked by the grammar the launch uses, with placeholder-looking values.
                          std::map<std::string, std::string> probe;
                          for (const auto& n : command_placeholders()) probe[n] = "x";
                          for (std::size_t i = 0; i < xs->size(); ++i) {
                              try {
                                  expand_placeholders((*xs)[i], probe);
                              } catch (const std::invalid_argument& e) {
                                  w.error(v[i], k + "[" + std::to_string(i) + "]", e.what());
                                  return;
                              }
                          }
                          c.argv = std::move(*xs);
                      }},
                     {"health_path",
                      [&](auto&, auto& v, auto& k) {
                          auto s = w.str(v, k);
                          if (!s) return;
                          if (config::ascii_lower(*s) == "none") {  // ready when its port accepts
                              c.health_path.clear();
                              return;
                          }
                          if (s->front() != '/' || s->find_first_of(" \r\n\t") != std::string::npos) {
                              w.error(v, k, "must be a URL path starting with '/' or none, got '" + *s + "'");
                              return;
                          }
                          c.health_path = *s;
                      }},
                     {"env",
                      [&](auto&, auto& v, auto& k) {
                          if (!v.IsMap()) {
                              w.error(v, k,
                                      "expected a mapping NAME: value, got " + config::Walker::describe(v));
                              return;
                          }
                          for (auto it = v.begin(); it != v.end(); ++it) {
                              const YAML::Node kn = it->first;
                              const std::string name = kn.IsScalar() ? kn.Scalar() : std::string();
                              const bool ok =
                                  !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                                  std::all_of(name.begin(), name.end(), [](char ch) {
                                      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                                  });
                              if (!ok) {
                                  w.error(kn, k, "'" + name + "' is not a valid environment variable name");
                                  continue;
                              }
                              if (auto val = w.str(it->second, k + "." + name, true)) c.env[name] = *val;
                          }
                      }},
                     {"routes",
                      [&](auto&, auto& v, auto& k) {
                          auto xs = w.str_list(v, k);
                          if (!xs) return;
                          for (std::size_t i = 0; i < xs->size(); ++i)
                              if (std::find(std::begin(kModelRoutes), std::end(kModelRoutes), (*xs)[i]) ==
                                  std::end(kModelRoutes)) {
                                  std::vector<std::string> known(std::begin(kModelRoutes),
                                                                 std::end(kModelRoutes));
                                  w.error(v[i], k + "[" + std::to_string(i) + "]",
                                          "'" + (*xs)[i] + "' is not a model route loch serves (one of " +
                                              config::quoted_list(known) + ")");
                                  return;
                              }
                          c.routes = std::move(*xs);
                      }},
                     {"ctx", w.integer_into(c.ctx, 1, 1 << 24)},
                     {"parallel", w.integer_into(c.parallel, 1, 256)},
                     {"threads", w.integer_into(c.threads, 1, 4096)},
                 });
         }}};
}

void CommandKind::check(config::Walker& w, const YAML::Node& entry, const std::string& path,
                        config::ModelConfig& m, bool) const {
    const auto& c = command_settings(m);
    if (!c.threads)
        for (const auto& a : c.argv)
            if (a.find("{threads}") != std::string::npos) {
                w.error(entry["command"], path + ".command.threads",
                        "argv uses {threads} but command.threads is not set (the CPU threads the server "
                        "computes with, e.g. threads: 4)");
                return;
            }
    if (!c.argv.empty()) return;
    const YAML::Node section = entry["command"];
    if (!section.IsDefined()) {
        const YAML::Node at = entry["engine"];
        w.error(
            at.IsDefined() ? at : entry, path + ".command",
            "engine 'command' needs a 'command:' section with 'argv' (the server's command line as a list)");
    } else if (section.IsMap() && !section["argv"].IsDefined()) {
        w.error(section, path + ".command", "missing 'argv' (the server's command line as a list)");
    }  // else: argv was there, and its own error is reported
}

std::optional<std::uint32_t> CommandKind::cpu_threads(const config::ModelConfig& model, const Placement&,
                                                      std::uint32_t, std::uint32_t) const {
    return command_settings(model).threads;
}

const Kind& command_kind() {
    static const CommandKind kind;
    return kind;
}

}  // namespace loch::engines
