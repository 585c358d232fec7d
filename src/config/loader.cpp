// The YAML loader: walks every mapping key by key (so unknown and duplicate keys are caught with their
// position), converts and range-checks each value, collects every problem, then validates across models.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cctype>
#include <charconv>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "config/config.hpp"
#include "config/kind_schema.hpp"
#include "config/schema.hpp"
#include "config/sections.hpp"
#include "config/walker.hpp"

namespace loch::config {

// ---------------------------------------------------------------------------------------------------------
// The walker

namespace {

class Loader : public Walker {
  public:
    Loader(std::string file, fs::path base_dir, const LoadContext& ctx)
        : Walker(std::move(file), ctx.home), base_dir_(std::move(base_dir)), ctx_(ctx) {}

    // --- sections ---

    // `defaults:` — every model setting, and every kind's keys into that kind's settings.
    struct Defaults {
        ModelConfig model;
        std::map<std::string, std::shared_ptr<KindSettings>> settings;  // by kind name
    };
    Defaults parse_defaults(const YAML::Node& node) {
        Defaults d;
        auto keys = model_setting_keys(*this, d.model);
        for (auto& k : kind_keys(d.settings)) keys.push_back(std::move(k));
        if (node.IsDefined() && !node.IsNull()) walk(node, "defaults", keys);
        return d;
    }

    // The kind a model entry names (`engine:`), or the default kind; nullptr (with an error) for an unknown
    // name.
    const KindSchema* kind_of_entry(const YAML::Node& node, const std::string& path) {
        if (ctx_.kinds.empty()) {
            error(node, path, "no engine kinds are registered (a bug in the caller of the config loader)");
            return nullptr;
        }
        const YAML::Node e = node.IsMap() ? node["engine"] : YAML::Node();
        if (!e.IsDefined() || e.IsNull()) return ctx_.kinds.front();
        std::vector<std::string> names;
        for (const auto* k : ctx_.kinds) {
            if (e.IsScalar() && ascii_lower(e.Scalar()) == k->name()) return k;
            names.emplace_back(k->name());
        }
        error(e, path + ".engine", "expected one of " + quoted_list(names) + ", got " + describe(e));
        return nullptr;
    }

    // Every kind's keys, each parsing into that kind's settings (for `defaults:`). A key two kinds share is
    // handed to both.
    Keys kind_keys(std::map<std::string, std::shared_ptr<KindSettings>>& settings) {
        Keys out;
        for (const auto* k : ctx_.kinds) {
            auto& s = settings[std::string(k->name())];
            if (!s) s = k->initial_settings();
            for (auto& [key, h] : k->keys(*this, *s)) {
                auto same =
                    std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == key; });
                if (same == out.end()) {
                    out.emplace_back(key, h);
                } else {
                    same->second = [a = same->second, b = h](auto& kn, auto& v, auto& path) {
                        a(kn, v, path);
                        b(kn, v, path);
                    };
                }
            }
        }
        return out;
    }

    ModelConfig parse_model(const YAML::Node& node, const std::string& path, const Defaults& defaults,
                            const fs::path& models_dir) {
        ModelConfig m = defaults.model;
        m.file = file();
        m.line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
        std::optional<YAML::Node> name_node, path_node;
        std::string path_text;
        const KindSchema* kind = kind_of_entry(node, path);
        std::unique_ptr<KindSettings> settings;
        auto handlers = model_setting_keys(*this, m);
        handlers.push_back({"name", [&](auto&, auto& v, auto& k) {
                                name_node.emplace(v);
                                if (auto s = str(v, k)) {
                                    if (!valid_model_name(*s)) {
                                        error(v, k,
                                              "'" + *s +
                                                  "' is not a valid model name (1-128 of A-Z a-z 0-9 . _ : + "
                                                  "-, starting with a letter or digit)");
                                    } else {
                                        m.name = *s;
                                    }
                                }
                            }});
        handlers.push_back(
            {"aliases", [&](auto&, auto& v, auto& k) {
                 auto xs = str_list(v, k);
                 if (!xs) return;
                 for (std::size_t i = 0; i < xs->size(); ++i) {
                     if (!valid_model_alias((*xs)[i])) {
                         error(v[i], k + "[" + std::to_string(i) + "]",
                               "'" + (*xs)[i] +
                                   "' is not a valid alias (a model name, '/' allowed between parts)");
                         return;
                     }
                 }
                 m.aliases = std::move(*xs);
             }});
        handlers.push_back({"engine", [&](auto&, auto&, auto&) {}});  // read by kind_of_entry
        handlers.push_back({"path", [&](auto&, auto& v, auto& k) {
                                path_node.emplace(v);
                                if (auto s = str(v, k)) path_text = *s;
                            }});
        if (kind) {
            m.engine = std::string(kind->name());
            auto d = defaults.settings.find(m.engine);
            settings =
                d != defaults.settings.end() && d->second ? d->second->clone() : kind->initial_settings();
            for (auto& h : kind->keys(*this, *settings)) handlers.push_back(std::move(h));
            // Another kind's keys: say whose they are.
            for (const auto* other : ctx_.kinds) {
                if (other == kind) continue;
                auto scratch = std::shared_ptr<KindSettings>(other->initial_settings());
                for (auto& [key, h] : other->keys(*this, *scratch)) {
                    if (std::any_of(handlers.begin(), handlers.end(),
                                    [&](const auto& p) { return p.first == key; }))
                        continue;
                    handlers.push_back({key, [this, other, kind](auto&, auto& v, auto& k) {
                                            error(v, k,
                                                  "only for engine: " + std::string(other->name()) +
                                                      " (this model uses " + std::string(kind->name()) + ")");
                                        }});
                }
            }
        }
        walk(node, path, handlers);
        if (!node.IsMap()) return m;

        if (!name_node) error(node, path, "missing 'name' (what clients send as \"model\")");
        if (!kind) return m;
        m.settings = std::shared_ptr<const KindSettings>(std::move(settings));
        if (!path_node) {
            if (kind->needs_path())
                error(node, path, "missing 'path' (the model file; relative paths are under models_dir)");
        } else if (!path_text.empty()) {
            m.path = resolve(models_dir, path_text);
            if (ctx_.check_files) {
                std::error_code ec;
                if (!fs::exists(m.path, ec))
                    error(*path_node, path + ".path", "model file not found: " + m.path.string());
            }
        }
        std::error_code ec;  // (the non-throwing overload: an unreadable folder is a diagnostic, not a crash)
        check_model(*kind, node, path, m, ctx_.check_files && fs::exists(m.path, ec));
        return m;
    }

    // An IP address to listen on (`listen`, `agent.listen`); nullopt after reporting what is wrong.
    std::optional<boost::asio::ip::address> address(const YAML::Node& v, const std::string& k) {
        auto s = str(v, k);
        if (!s) return std::nullopt;
        boost::system::error_code ec;
        const auto addr = boost::asio::ip::make_address(*s, ec);
        if (!ec) return addr;
        error(v, k,
              "'" + *s +
                  "' is not an IP address (127.0.0.1 for this machine only, 0.0.0.0 for every interface)");
        return std::nullopt;
    }

    Config parse(const YAML::Node& root, Config c) {
        if (root.IsNull() || !root.IsDefined()) {
            error_at(1, "", "the file is empty: it needs at least a 'models:' list");
            return c;
        }
        std::string models_dir_text, state_dir_text, log_dir_text, engine_dir_text;
        std::optional<YAML::Node> defaults_node, models_node;
        walk(root, "",
             {
                 {"listen",
                  [&](auto&, auto& v, auto& k) {
                      if (const auto addr = address(v, k)) {
                          c.listen = v.Scalar();
                          listen_loopback_ = addr->is_loopback();
                          listen_node_ = v;
                      }
                  }},
                 {"port",
                  [&](auto&, auto& v, auto& k) {
                      if (auto x = integer(v, k, 0, 65535)) c.port = static_cast<std::uint16_t>(*x);
                  }},
                 {"agent",
                  [&](auto&, auto& v, auto& k) {
                      AgentConfig a;
                      walk(v, k,
                           {
                               {"listen",
                                [&](auto&, auto& v2, auto& k2) {
                                    if (const auto addr = address(v2, k2)) {
                                        a.listen = v2.Scalar();
                                        agent_loopback_ = addr->is_loopback();
                                        agent_node_ = v2;
                                    }
                                }},
                               {"port",
                                [&](auto&, auto& v2, auto& k2) {
                                    if (auto x = integer(v2, k2, 0, 65535))
                                        a.port = static_cast<std::uint16_t>(*x);
                                }},
                           });
                      c.agent = a;
                  }},
                 {"api_keys",
                  [&](auto&, auto& v, auto& k) {
                      auto xs = str_list(v, k);
                      if (!xs) return;
                      for (std::size_t i = 0; i < xs->size(); ++i) {
                          if ((*xs)[i].find_first_of(" \t\r\n") != std::string::npos) {
                              error(v[i], k + "[" + std::to_string(i) + "]",
                                    "an API key cannot contain whitespace");
                              return;
                          }
                      }
                      c.api_keys.insert(c.api_keys.end(), xs->begin(), xs->end());
                  }},
                 {"api_keys_file",
                  [&](auto&, auto& v, auto& k) {
                      if (auto s = str(v, k)) read_api_keys_file(resolve(base_dir_, *s), v, k, c.api_keys);
                  }},
                 {"models_dir",
                  [&](auto&, auto& v, auto& k) {
                      if (auto s = str(v, k)) models_dir_text = *s;
                  }},
                 {"state_dir",
                  [&](auto&, auto& v, auto& k) {
                      if (auto s = str(v, k)) state_dir_text = *s;
                  }},
                 {"log_dir",
                  [&](auto&, auto& v, auto& k) {
                      if (auto s = str(v, k)) log_dir_text = *s;
                  }},
                 {"engine_dir",
                  [&](auto&, auto& v, auto& k) {
                      if (auto s = str(v, k)) engine_dir_text = *s;
                  }},
                 {"queue", [&](auto&, auto& v, auto& k) { walk_queue(*this, v, k, c.queue); }},
                 {"max_body",
                  [&](auto&, auto& v, auto& k) {
                      if (auto b = size(v, k, 1024)) c.max_body_bytes = *b;
                  }},
                 {"max_batch_file",
                  [&](auto&, auto& v, auto& k) {
                      if (auto b = size(v, k, 1024)) c.max_batch_file_bytes = *b;
                  }},
                 {"responses",
                  [&](auto&, auto& v, auto& k) { walk_stored_responses(*this, v, k, c.responses); }},
                 {"batch_concurrency",
                  [&](auto&, auto& v, auto& k) {
                      if (auto x = integer(v, k, 0, 1024))
                          c.batch_concurrency = static_cast<std::uint32_t>(*x);
                  }},
                 {"max_connections",
                  [&](auto&, auto& v, auto& k) {
                      if (auto x = integer(v, k, 1, 1000000))
                          c.max_connections = static_cast<std::uint32_t>(*x);
                  }},
                 {"client_timeouts",
                  [&](auto&, auto& v, auto& k) { walk_client_timeouts(*this, v, k, c.client_timeouts); }},
                 {"max_wait",
                  [&](auto&, auto& v, auto& k) {
                      if (auto d = duration(v, k)) c.max_wait = *d;
                  }},
                 {"stop_grace",
                  [&](auto&, auto& v, auto& k) {
                      if (auto d = duration(v, k, Seconds{1})) c.stop_grace = *d;
                  }},
                 {"restart", [&](auto&, auto& v, auto& k) { walk_restart(*this, v, k, c.restart); }},
                 {"read_ahead",
                  [&](auto&, auto& v, auto& k) {
                      if (auto b = boolean(v, k)) c.read_ahead = *b;
                  }},
                 {"slot_save", [&](auto&, auto& v, auto& k) { walk_slot_save(*this, v, k, c.slot_save); }},
                 {"devices",
                  [&](auto&, auto& v, auto& k) {
                      if (!v.IsMap()) {
                          error(v, k,
                                "expected a mapping of device id → settings (cpu:, nvidia:0:, …), got " +
                                    describe(v));
                          return;
                      }
                      std::vector<std::pair<std::string, Handler>> hs;
                      for (auto it = v.begin(); it != v.end(); ++it) {
                          if (!it->first.IsScalar()) continue;
                          const std::string id = it->first.Scalar();
                          hs.push_back({id, [&c, this, id](auto& kn, auto& v2, auto& k2) {
                                            if (auto why = device_id_problem(id)) {
                                                error(kn, k2, *why);
                                                return;
                                            }
                                            DeviceConfig d;
                                            d.id = id;
                                            walk_device(*this, v2, k2, d);
                                            c.devices[id] = d;
                                        }});
                      }
                      walk(v, k, hs);
                  }},
                 {"defaults", [&](auto&, auto& v, auto&) { defaults_node.emplace(v); }},
                 {"models", [&](auto&, auto& v, auto&) { models_node.emplace(v); }},
             });
        if (!root.IsMap()) return c;

        c.models_dir = models_dir_text.empty() ? (c.models_dir.empty() ? base_dir_ / "models" : c.models_dir)
                                               : resolve(base_dir_, models_dir_text);
        c.state_dir = state_dir_text.empty()
                          ? (ctx_.default_state_dir.empty() ? base_dir_ / ".loch" : ctx_.default_state_dir)
                          : resolve(base_dir_, state_dir_text);
        c.log_dir = log_dir_text.empty() ? c.state_dir / "logs" : resolve(base_dir_, log_dir_text);
        c.engine_dir = engine_dir_text.empty() ? ctx_.exe_dir : resolve(base_dir_, engine_dir_text);

        Defaults defaults = parse_defaults(defaults_node ? *defaults_node : YAML::Node());

        if (models_node) {
            if (!models_node->IsSequence()) {
                error(*models_node, "models",
                      "expected a list of models ('- name: …' entries), got " + describe(*models_node));
            } else {
                for (std::size_t i = 0; i < models_node->size(); ++i) {
                    c.models.push_back(parse_model((*models_node)[i], "models[" + std::to_string(i) + "]",
                                                   defaults, c.models_dir));
                }
            }
        } else if (require_models_) {
            error(root, "models", "missing 'models:' list (every model loch may serve)");
        }
        if (c.agent && c.agent->port != 0 && c.agent->port == c.port)
            error(
                agent_node_ ? agent_node_ : root, "agent.port",
                "the agent's port " + std::to_string(c.port) + " is the API's port: give it its own (8081)");
        if (c.api_keys.empty() && !agent_loopback_ && !keys_file_failed_)
            error(agent_node_, "agent.listen",
                  "'" + c.agent->listen +
                      "' is reachable from other machines, and api_keys is empty: add api_keys (HAProxy then "
                      "sends one in its agent-send line: docs/several-boxes.md), or listen on 127.0.0.1");
        if (!c.api_keys.empty() || listen_loopback_ || keys_file_failed_) return c;
        error(listen_node_, "listen",
              "'" + c.listen +
                  "' is reachable from other machines, and api_keys is empty: anyone who can reach it could "
                  "use every model. Add api_keys, or listen on 127.0.0.1");
        return c;
    }

    // api_keys_file: one key per line (a Kubernetes Secret or a podman secret mounted as a file); blank lines
    // and lines starting with '#' are skipped. A missing or empty file is an error, not an open API.
    void read_api_keys_file(const fs::path& file, const YAML::Node& v, const std::string& k,
                            std::vector<std::string>& keys) {
        std::ifstream in(file);
        keys_file_failed_ = true;  // until it gave keys: its own error says why, not "api_keys is empty"
        if (!in) {
            error(v, k, "cannot read '" + file.string() + "' (one API key per line; mount the secret there)");
            return;
        }
        std::size_t found = 0;
        for (std::string line; std::getline(in, line);) {
            const auto b = line.find_first_not_of(" \t\r");
            if (b == std::string::npos || line[b] == '#') continue;
            const auto e = line.find_last_not_of(" \t\r");
            const auto key = line.substr(b, e - b + 1);
            if (key.find_first_of(" \t") != std::string::npos) {
                error(v, k, "'" + file.string() + "': an API key cannot contain whitespace");
                return;
            }
            keys.push_back(key);
            ++found;
        }
        if (found == 0)
            error(v, k, "'" + file.string() + "' holds no API key (one per line)");
        else
            keys_file_failed_ = false;
    }

    // Cross-model checks: unique names/aliases, the kinds' programs.
    void finish(Config& c) {
        struct Seen {
            std::string name;
            std::string owner;
            int line;
        };
        std::map<std::string, Seen> seen;  // lower-case → first use
        for (std::size_t i = 0; i < c.models.size(); ++i) {
            const auto& m = c.models[i];
            std::vector<std::string> names;
            if (!m.name.empty()) names.push_back(m.name);
            names.insert(names.end(), m.aliases.begin(), m.aliases.end());
            for (const auto& n : names) {
                const auto [it, fresh] = seen.emplace(ascii_lower(n), Seen{n, m.name, m.line});
                if (fresh) continue;
                const std::string where = "models[" + std::to_string(i) + "]";
                std::string msg = it->second.name == n
                                      ? "'" + n + "' is already used"
                                      : "'" + n + "' differs only by case from '" + it->second.name + "'";
                msg += " by model '" + it->second.owner + "'" +
                       (it->second.line > 0 ? " (line " + std::to_string(it->second.line) + ")" : "");
                error_at(m.line, where, msg);
            }
        }
        // Each kind's program, for the kinds some model uses.
        for (const auto* k : ctx_.kinds) {
            const std::string program = k->program();
            if (program.empty()) continue;
            const auto first = std::find_if(c.models.begin(), c.models.end(),
                                            [&](const auto& m) { return m.engine == k->name(); });
            if (first == c.models.end()) continue;
            std::vector<fs::path> dirs{c.engine_dir};
            dirs.insert(dirs.end(), ctx_.path_dirs.begin(), ctx_.path_dirs.end());
            const auto found = find_executable(program, dirs);
            // Its builds by backend (engine_dir/<backend>/), then the one found in engine_dir or on PATH.
            auto builds = find_engine_builds(c.engine_dir, program, found.value_or(fs::path()));
            if (found) {
                c.programs[std::string(k->name())] = *found;
            } else if (!builds.empty()) {
                c.programs[std::string(k->name())] = builds.front().program;
            } else if (!ctx_.check_files) {
                c.programs[std::string(k->name())] = c.engine_dir / program;
            } else {
                const std::string get = k->how_to_get();
                error_at(first->line, "engine_dir",
                         program + " not found in " + c.engine_dir.string() + " nor on PATH (model '" +
                             first->name + "' needs it" + (get.empty() ? "" : ": " + get + ";") +
                             (get.empty() ? ";" : " or") + " set engine_dir to the folder that holds it)");
            }
            if (!builds.empty()) c.builds[std::string(k->name())] = std::move(builds);
        }
    }

    bool require_models_ = true;

    // A model found on disk rather than written as an entry (the embedded default's models_dir): its kind's
    // check as if an entry named its file, and what its file says read. The first problem (the caller
    // leaves the model out), or empty.
    std::string check_found(ModelConfig& m) {
        const auto kind = std::find_if(ctx_.kinds.begin(), ctx_.kinds.end(),
                                       [&](const KindSchema* k) { return k->name() == m.engine; });
        if (kind == ctx_.kinds.end()) return "no engine kind '" + m.engine + "'";
        YAML::Node entry;  // (no position: a diagnostic of a found file has none)
        entry["name"] = m.name;
        entry["path"] = m.path.string();
        const std::size_t before = diags.size();
        check_model(**kind, entry, "models_dir/" + m.path.filename().string(), m, ctx_.check_files);
        if (diags.size() == before) return {};
        std::string why = diags[before].message;
        diags.resize(before);
        return why;
    }

  private:
    // The kind's check of one model, then (where files are checked) what its file says, read once here.
    void check_model(const KindSchema& kind, const YAML::Node& entry, const std::string& path, ModelConfig& m,
                     bool files) {
        kind.check(*this, entry, path, m, files);
        if (ctx_.check_files) m.file_facts = std::make_shared<const nlohmann::json>(kind.describe_file(m));
    }

    fs::path base_dir_;
    const LoadContext& ctx_;
    bool listen_loopback_ = true;
    YAML::Node listen_node_;
    bool agent_loopback_ = true;
    bool keys_file_failed_ = false;  // api_keys_file named but gave no key (its own error says why)
    YAML::Node agent_node_;
};

}  // namespace

YAML::Node load_yaml(std::string_view text, const std::string& file) {
    try {
        return YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
        Diagnostic d;
        d.file = file;
        if (e.mark.line >= 0) {
            d.line = e.mark.line + 1;
            d.column = e.mark.column + 1;
        }
        d.message = "YAML syntax: " + e.msg;
        throw ConfigError({d});
    }
}

// ---------------------------------------------------------------------------------------------------------
// Entry points

Config parse_config(std::string_view yaml, const fs::path& file_name, const LoadContext& ctx) {
    const std::string file = file_name.string();
    const YAML::Node root = load_yaml(yaml, file);
    fs::path base = file_name.parent_path();
    if (base.empty())
        base = ctx.cwd;
    else if (base.is_relative())
        base = ctx.cwd / base;
    Loader loader(file, base.lexically_normal(), ctx);
    Config c;
    c.source = file;
    try {
        c = loader.parse(root, std::move(c));
        loader.finish(c);
    } catch (const YAML::Exception& e) {
        // yaml-cpp throws for pathological documents (e.g. aliases of odd kinds); never crash on input.
        Diagnostic d{file, e.mark.line >= 0 ? e.mark.line + 1 : 0, e.mark.column >= 0 ? e.mark.column + 1 : 0,
                     "", "YAML: " + e.msg};
        loader.diags.push_back(std::move(d));
    }
    if (!loader.diags.empty()) {
        // In file order (cross-model checks run after the walk).
        std::stable_sort(loader.diags.begin(), loader.diags.end(),
                         [](const Diagnostic& a, const Diagnostic& b) { return a.line < b.line; });
        throw ConfigError(std::move(loader.diags));
    }
    return c;
}

Config load_config_file(const fs::path& file, const LoadContext& ctx) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        throw ConfigError({Diagnostic{file.string(), 0, 0, "",
                                      "cannot open the config file (does it exist? permissions?)"}});
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    return parse_config(ss.str(), file, ctx);
}

// ---------------------------------------------------------------------------------------------------------
// The schema, for discover.cpp

struct Schema::Impl {
    Loader loader;
};

Schema::Schema(std::string file, fs::path base_dir, const LoadContext& ctx)
    : impl_(std::make_unique<Impl>(Impl{Loader(std::move(file), std::move(base_dir), ctx)})) {}
Schema::~Schema() = default;
Config Schema::parse(const YAML::Node& root, Config c) {
    return impl_->loader.parse(root, std::move(c));
}
ModelConfig Schema::default_model(const YAML::Node& defaults_node) {
    auto d = impl_->loader.parse_defaults(defaults_node);
    ModelConfig m = d.model;
    const KindSchema* kind = impl_->loader.kind_of_entry(YAML::Node(), "defaults");
    if (!kind) return m;
    m.engine = std::string(kind->name());
    auto s = d.settings.find(m.engine);
    m.settings = s != d.settings.end() && s->second
                     ? std::shared_ptr<const KindSettings>(s->second->clone())
                     : std::shared_ptr<const KindSettings>(kind->initial_settings());
    return m;
}
void Schema::finish(Config& c) {
    impl_->loader.finish(c);
}
std::string Schema::check_found(ModelConfig& m) {
    return impl_->loader.check_found(m);
}
std::vector<Diagnostic>& Schema::diagnostics() {
    return impl_->loader.diags;
}

}  // namespace loch::config
