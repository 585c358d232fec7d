// The config's small sections (sections.hpp).
#include "config/sections.hpp"

namespace loch::config {

void walk_queue(Walker& w, const YAML::Node& node, const std::string& path, QueueLimits& q) {
    w.walk(node, path,
           {
               {"interactive",
                [&](auto&, auto& v, auto& k) {
                    if (auto x = w.integer(v, k, 0, 1000000)) q.interactive = static_cast<std::uint32_t>(*x);
                }},
               {"batch",
                [&](auto&, auto& v, auto& k) {
                    if (auto x = w.integer(v, k, 0, 1000000)) q.batch = static_cast<std::uint32_t>(*x);
                }},
           });
}

void walk_stored_responses(Walker& w, const YAML::Node& node, const std::string& path, StoredResponses& r) {
    w.walk(node, path,
           {
               {"max_age",
                [&](auto&, auto& v, auto& k) {
                    if (auto d = w.duration(v, k, Seconds{1})) r.max_age = *d;
                }},
               {"max_bytes",
                [&](auto&, auto& v, auto& k) {
                    if (auto b = w.size(v, k, 0)) r.max_bytes = *b;
                }},
           });
}

void walk_client_timeouts(Walker& w, const YAML::Node& node, const std::string& path, ClientTimeouts& t) {
    w.walk(node, path,
           {
               {"idle",
                [&](auto&, auto& v, auto& k) {
                    if (auto d = w.duration(v, k, Seconds{1})) t.idle = *d;
                }},
               {"header",
                [&](auto&, auto& v, auto& k) {
                    if (auto d = w.duration(v, k, Seconds{1})) t.header = *d;
                }},
               {"body",
                [&](auto&, auto& v, auto& k) {
                    if (auto d = w.duration(v, k, Seconds{1})) t.body = *d;
                }},
           });
}

void walk_restart(Walker& w, const YAML::Node& node, const std::string& path, RestartConfig& r) {
    w.walk(node, path,
           {
               {"max_crashes",
                [&](auto&, auto& v, auto& k) {
                    if (auto x = w.integer(v, k, 1, 1000)) r.max_crashes = static_cast<std::uint32_t>(*x);
                }},
               {"window",
                [&](auto&, auto& v, auto& k) {
                    if (auto d = w.duration(v, k, Seconds{1})) r.window = *d;
                }},
               {"backoff_initial",
                [&](auto&, auto& v, auto& k) {
                    if (auto d = w.duration(v, k)) r.backoff_initial = *d;
                }},
               {"backoff_max",
                [&](auto&, auto& v, auto& k) {
                    if (auto d = w.duration(v, k)) r.backoff_max = *d;
                }},
               {"quarantine",
                [&](auto&, auto& v, auto& k) {
                    if (auto d = w.duration(v, k)) r.quarantine = *d;
                }},
           });
    if (r.backoff_max < r.backoff_initial) w.error(node, path, "backoff_max is smaller than backoff_initial");
}

void walk_slot_save(Walker& w, const YAML::Node& node, const std::string& path, SlotSaveConfig& s) {
    w.walk(node, path,
           {
               {"enabled",
                [&](auto&, auto& v, auto& k) {
                    if (auto b = w.boolean(v, k)) s.enabled = *b;
                }},
               {"max_disk",
                [&](auto&, auto& v, auto& k) {
                    if (auto b = w.size(v, k, 0)) s.max_disk = *b;
                }},
               {"min_tokens",
                [&](auto&, auto& v, auto& k) {
                    if (auto x = w.integer(v, k, 1, 100000000)) s.min_tokens = static_cast<std::uint32_t>(*x);
                }},
           });
}

void walk_device(Walker& w, const YAML::Node& node, const std::string& path, DeviceConfig& d) {
    d.line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    w.walk(node, path,
           {
               {"reserve",
                [&](auto&, auto& v, auto& k) {
                    if (auto b = w.size(v, k)) d.reserve = *b;
                }},
               {"budget",
                [&](auto&, auto& v, auto& k) {
                    if (auto b = w.size(v, k, 1)) d.budget = *b;
                }},
               {"margin",
                [&](auto&, auto& v, auto& k) {
                    if (auto b = w.size(v, k)) d.margin = *b;
                }},
               {"backend",
                [&](auto&, auto& v, auto& k) {
                    auto s = w.str(v, k);
                    if (!s) return;
                    if (*s != "cuda" && *s != "rocm" && *s != "vulkan") {
                        w.error(v, k,
                                "expected cuda, rocm or vulkan (the engine build that runs here), got '" +
                                    *s + "'");
                        return;
                    }
                    d.backend = *s;
                }},
           });
}

Walker::Keys model_setting_keys(Walker& w, ModelConfig& m) {
    return {
        {"devices",
         [&w, &m](auto&, auto& v, auto& k) {
             auto xs = w.str_list(v, k);
             if (!xs) return;
             for (std::size_t i = 0; i < xs->size(); ++i) {
                 if (auto why = device_id_problem((*xs)[i])) {
                     w.error(v[i], k + "[" + std::to_string(i) + "]", *why);
                     return;
                 }
             }
             m.devices = std::move(*xs);
         }},
        {"cpu_fallback",
         [&w, &m](auto&, auto& v, auto& k) {
             if (auto b = w.boolean(v, k)) m.cpu_fallback = *b;
         }},
        {"priority",
         [&w, &m](auto&, auto& v, auto& k) {
             if (auto p = w.choice<Priority>(
                     v, k, {{"interactive", Priority::interactive}, {"batch", Priority::batch}}))
                 m.priority = *p;
         }},
        {"keep_alive",
         [&w, &m](auto&, auto& v, auto& k) {
             if (v.IsScalar() && ascii_lower(v.Scalar()) == "forever")
                 m.keep_alive.reset();
             else if (auto d = w.duration(v, k))
                 m.keep_alive = *d;
         }},
        {"pinned",
         [&w, &m](auto&, auto& v, auto& k) {
             if (auto b = w.boolean(v, k)) m.pinned = *b;
         }},
        {"concurrency",
         [&w, &m](auto&, auto& v, auto& k) {
             if (auto x = w.integer(v, k, 0, 1024)) m.concurrency = static_cast<std::uint32_t>(*x);
         }},
        {"startup_timeout",
         [&w, &m](auto&, auto& v, auto& k) {
             if (auto d = w.duration(v, k, Seconds{1})) m.startup_timeout = *d;
         }},
        {"watchdog",
         [&w, &m](auto&, auto& v, auto& k) {
             if (v.IsScalar() && ascii_lower(v.Scalar()) == "off")
                 m.watchdog.reset();
             else if (auto d = w.duration(v, k)) {
                 if (d->count() == 0)
                     m.watchdog.reset();
                 else
                     m.watchdog = *d;
             }
         }},
        {"exclusive",
         [&w, &m](auto&, auto& v, auto& k) {
             if (auto b = w.boolean(v, k)) m.exclusive = *b;
         }},
        {"memory",
         [&w, &m](auto&, auto& v, auto& k) {
             // One figure for every device, or a mapping device id → figure.
             m.memory.clear();
             if (v.IsScalar()) {
                 if (auto b = w.size(v, k, 1)) m.memory["*"] = *b;
                 return;
             }
             if (!v.IsMap()) {
                 w.error(
                     v, k,
                     "expected a size (\"20GiB\") or a mapping device id: size, got " + Walker::describe(v));
                 return;
             }
             for (auto it = v.begin(); it != v.end(); ++it) {
                 const YAML::Node kn = it->first;
                 const std::string id = kn.IsScalar() ? kn.Scalar() : std::string();
                 if (auto b = w.size(it->second, k + "." + id, 1)) m.memory[id] = *b;
             }
         }},
    };
}

}  // namespace loch::config
