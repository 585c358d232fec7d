// bench/proxy-overhead — what loch adds on the request path, next to nginx doing the same job.
//
// One llama-server (the engine loch starts on demand, `-t 1` so that its own stalls do not swamp the proxies)
// is measured three ways in one run: directly, through `loch serve`, and through nginx (reverse proxy with an
// upstream keep-alive pool and proxy_buffering off — the fair setup for SSE). In each of `--rounds` rounds
// every target runs every workload, in an order that rotates per round, so that load from elsewhere hits all
// alike; the report gives medians over rounds of each round's figures, and of each round's ratio loch ÷ nginx
// of what they add over direct:
//   - a non-streamed `/v1/completions` (`max_tokens: 1`): p50/p99 per request on one keep-alive client
//     connection, and with a new connection per request; the proxy's CPU per request (schedstat, ns);
//   - streamed chat completions: the gap between events, and the proxy's CPU per event;
//   - req/s with 32 and with 256 concurrent client connections;
// then the cold start (request → first answer for a stopped model, minus the engine started alone with the
// same argv), and the idle CPU and RSS of loch and nginx over `--idle-s` seconds after the load.
// With `--llama-swap BIN` llama-swap is a fourth target in front of the same engine (its model's `proxy:` is
// the engine's address and its `cmd` only holds the place, so it never starts an engine of its own), and the
// report adds loch ÷ llama-swap.
//
//   build/bin/proxy-overhead [--model X.gguf] [--rounds 7] [--requests 100] [--streams 4] [--tokens 64]
//                            [--llama-swap /path/to/llama-swap]
// Without --model it generates the loch-synth `tiny-llama` model (fast tokens: the proxy's share is largest).
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "http/sse.hpp"
#include "support/http_client.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

double us(Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const double idx = p / 100.0 * double(v.size() - 1);
    const auto lo = static_cast<std::size_t>(idx);
    const auto hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (idx - double(lo));
}

struct StreamTimes {
    std::vector<double> arrivals_us;  // per event, since the request was sent
};

// One POST; for a stream, the arrival time of every SSE event.
// The secret loch gave the engine (engines/spec.hpp): direct requests and nginx must send it too.
std::string engine_key(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    const std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string key = "LLAMA_API_KEY=";
    const auto at = env.find(key);
    if (at == std::string::npos) return {};
    const auto end = env.find('\0', at);
    return env.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
}

std::uint16_t free_port() {
    asio::io_context ioc;
    asio::ip::tcp::acceptor acc(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    return acc.local_endpoint().port();
}

void wait_http(std::uint16_t port, const std::string& path, loch::test::Process& p, const std::string& what) {
    for (int i = 0; i < 400; ++i) {
        try {
            if (loch::test::http_get(port, path, 1s).status == 200) return;
        } catch (const std::exception&) {
        }
        if (!p.running()) break;
        std::this_thread::sleep_for(50ms);
    }
    throw std::runtime_error(what + " did not come up:\n" + p.log_tail());
}

// CPU time of every thread of `pid`, ns (schedstat: ns precision, unlike /proc/PID/stat's 10 ms ticks).
std::uint64_t cpu_ns(int pid) {
    std::uint64_t total = 0;
    std::error_code ec;
    for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        std::ifstream in(t.path() / "schedstat");
        std::uint64_t run = 0;
        if (in >> run) total += run;
    }
    return total;
}

// User and kernel CPU of `pid` in clock ticks (/proc/PID/stat: utime, stime), and its context switches
// (voluntary + not, every thread: /proc/PID/status). Ticks are coarse (10 ms): summed over a whole run.
struct KernelSide {
    std::uint64_t user_ticks = 0, kernel_ticks = 0, switches = 0;
};
KernelSide kernel_side(int pid) {
    KernelSide k;
    {
        std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
        std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        // Fields after the command name, which is in parentheses and may hold spaces: utime is the 14th.
        std::istringstream rest(stat.substr(stat.rfind(')') + 2));
        std::string field;
        for (int i = 3; i <= 13 && rest >> field; ++i) {
        }
        rest >> k.user_ticks >> k.kernel_ticks;
    }
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string key;
    while (in >> key) {
        std::uint64_t v = 0;
        if ((key == "voluntary_ctxt_switches:" || key == "nonvoluntary_ctxt_switches:") && in >> v)
            k.switches += v;
    }
    return k;
}

std::uint64_t rss_bytes(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string k;
    while (in >> k)
        if (k == "VmRSS:") {
            std::uint64_t kb = 0;
            in >> kb;
            return kb * 1024;
        }
    return 0;
}

// One client connection kept alive over many requests (synchronous: one request at a time).
class KeepAlive {
  public:
    explicit KeepAlive(std::uint16_t port) : port_(port), sock_(ioc_) { connect(); }
    void connect() {
        boost::system::error_code ec;
        sock_.close(ec);
        buf_.clear();
        sock_.connect({asio::ip::make_address("127.0.0.1"), port_});
        sock_.set_option(asio::ip::tcp::no_delay(true));
        timeval tv{60, 0};
        ::setsockopt(sock_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    // Seconds of each event's arrival after sending (one entry for a non-streamed answer).
    // `reconnect`: when the server ends the connection, open the next one now.
    std::vector<double> request(const std::string& target, const std::string& body, bool stream,
                                const std::string& bearer, bool reconnect = true) {
        bhttp::request<bhttp::string_body> req{bhttp::verb::post, target, 11};
        req.set(bhttp::field::host, "127.0.0.1");
        req.set(bhttp::field::content_type, "application/json");
        if (!bearer.empty()) req.set(bhttp::field::authorization, "Bearer " + bearer);
        req.body() = body;
        req.prepare_payload();
        const auto t0 = Clock::now();
        bhttp::write(sock_, req);
        bhttp::response_parser<bhttp::buffer_body> parser;
        parser.body_limit(boost::none);
        bhttp::read_header(sock_, buf_, parser);
        if (parser.get().result_int() != 200)
            throw std::runtime_error(fmt::format("HTTP {}", parser.get().result_int()));
        std::vector<double> out;
        loch::http::SseFramer framer;
        char tmp[8192];
        while (!parser.is_done()) {
            parser.get().body().data = tmp;
            parser.get().body().size = sizeof tmp;
            boost::beast::error_code ec;
            bhttp::read_some(sock_, buf_, parser, ec);
            if (ec == bhttp::error::need_buffer) ec = {};
            if (ec) throw boost::system::system_error(ec);
            if (stream)
                for (auto& e : framer.feed(std::string_view(tmp, sizeof tmp - parser.get().body().size))) {
                    (void)e;
                    out.push_back(us(Clock::now() - t0));
                }
        }
        if (!stream) out.push_back(us(Clock::now() - t0));
        if (!parser.keep_alive() && reconnect) connect();  // llama-server ends one after 100 requests
        return out;
    }

  private:
    std::uint16_t port_;
    asio::io_context ioc_;
    asio::ip::tcp::socket sock_;
    boost::beast::flat_buffer buf_;
};

// One request on a new connection (closed after it).
StreamTimes post(std::uint16_t port, const std::string& target, const std::string& body, bool stream,
                 const std::string& bearer = {}) {
    KeepAlive c(port);
    return {c.request(target, body, stream, bearer, /*reconnect=*/false)};
}

// `conns` concurrent keep-alive connections, `each` requests apiece: answered requests per second; the
// failed ones are added to `*errors`.
double throughput(std::uint16_t port, const std::string& body, const std::string& bearer, int conns, int each,
                  int* errors) {
    asio::io_context ioc;
    int failed = 0;
    auto one = [&](int) -> asio::awaitable<void> {
        constexpr auto tok = asio::as_tuple(asio::use_awaitable);
        boost::beast::tcp_stream s(co_await asio::this_coro::executor);
        auto [cec] = co_await s.async_connect({asio::ip::make_address("127.0.0.1"), port}, tok);
        if (cec) {
            failed += each;
            co_return;
        }
        boost::beast::flat_buffer buf;
        for (int i = 0; i < each; ++i) {
            bhttp::request<bhttp::string_body> req{bhttp::verb::post, "/v1/completions", 11};
            req.set(bhttp::field::host, "127.0.0.1");
            req.set(bhttp::field::content_type, "application/json");
            if (!bearer.empty()) req.set(bhttp::field::authorization, "Bearer " + bearer);
            req.body() = body;
            req.prepare_payload();
            s.expires_after(120s);
            auto [wec, wn] = co_await bhttp::async_write(s, req, tok);
            bhttp::response<bhttp::string_body> res;
            auto [rec, rn] = co_await bhttp::async_read(s, buf, res, tok);
            if (wec || rec || res.result_int() != 200) {
                failed += each - i;
                co_return;
            }
        }
    };
    const auto t0 = Clock::now();
    for (int c = 0; c < conns; ++c) asio::co_spawn(ioc, one(c), asio::detached);
    ioc.run();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    *errors += failed;
    return (conns * each - failed) / s;
}

// One round's figures for one target.
struct Figures {
    double ka_p50 = 0, ka_p99 = 0, new_p50 = 0, new_p99 = 0, gap_p50 = 0;
    double cpu_req_ns = 0, cpu_event_ns = 0, rps32 = 0, rps256 = 0;
};

struct Target {
    std::string name;
    std::uint16_t port;
    int pid;  // the proxy's process (0 for direct: no proxy)
    std::vector<Figures> rounds;
    int errors = 0;         // requests that failed (they are left out of the figures)
    KernelSide keep_alive;  // summed over the keep-alive phases of every round
    std::uint64_t keep_alive_requests = 0;
};

double median(std::vector<double> v) {
    return percentile(std::move(v), 50);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"proxy-overhead: what loch adds on the request path, next to nginx"};
    std::string model;
    int rounds = 7, requests = 100, streams = 4, tokens = 64, cold_rounds = 5;
    double idle_s = 10, settle_s = 12;
    std::string bin_dir = fs::canonical("/proc/self/exe").parent_path().string();
    std::string nginx = "/usr/sbin/nginx";
    std::string llama_swap;
    bool nginx_access_log = false;
    app.add_option("--model", model, "GGUF model (default: generate loch-synth tiny-llama)");
    app.add_option("--rounds", rounds, "rounds (every target runs every workload in each)");
    app.add_option("--requests", requests, "non-streamed requests per target per round");
    app.add_option("--streams", streams, "streamed requests per target per round");
    app.add_option("--tokens", tokens, "tokens per streamed request");
    app.add_option("--cold-rounds", cold_rounds, "cold starts measured (loch and the engine alone)");
    app.add_option("--idle-s", idle_s, "seconds of idle measured after the load");
    app.add_option("--settle-s", settle_s, "seconds without requests before the idle measurement");
    app.add_option("--bin", bin_dir, "folder with loch, loch-synth, llama-server");
    app.add_option("--nginx", nginx, "nginx binary");
    app.add_flag("--nginx-access-log", nginx_access_log,
                 "nginx writes its access log (one line per request, as loch writes its request log); off by "
                 "default, as in issue 9's measurement");
    app.add_option("--llama-swap", llama_swap, "llama-swap binary: measured as a fourth target when given");
    CLI11_PARSE(app, argc, argv);

    try {
        loch::test::TempDir dir("loch-proxy-bench");
        const fs::path bin(bin_dir);
        if (model.empty()) {
            model = (dir.path() / "tiny.gguf").string();
            const int st = loch::test::run_to_completion(
                bin / "loch-synth", {"--preset", "tiny-llama", "--weights", "small", "-o", model},
                dir.path() / "synth.log");
            if (st != 0) throw std::runtime_error("loch-synth failed");
        }
        // loch, serving the model twice: `bench` stays loaded (its engine is the one all three targets
        // reach); `cold` stops as soon as it is idle, so that each request to it is a cold start.
        const auto loch_port = free_port();
        const std::string args = "    args:\n      ctx: 2048\n      parallel: 4\n      threads: 1\n";
        std::ofstream(dir.path() / "loch.yaml")
            << "listen: 127.0.0.1\nstate_dir: " << (dir.path() / "state").string()
            << "\nengine_dir: " << bin_dir
            << "\nqueue: {interactive: 1024, batch: 64}\ndevices:\n  cpu:\n    budget: 4GiB\nmodels:\n  - "
               "name: bench\n    path: "
            << model << "\n    keep_alive: forever\n"
            << args << "  - name: cold\n    path: " << model << "\n    keep_alive: 0\n"
            << args;
        loch::test::Process loch(
            bin / "loch",
            {"serve", "--config", (dir.path() / "loch.yaml").string(), "--port", std::to_string(loch_port)},
            dir.path() / "loch.log");
        wait_http(loch_port, "/health", loch, "loch");
        const json one = {{"model", "bench"}, {"prompt", "Hi"}, {"max_tokens", 1}, {"temperature", 0}};
        post(loch_port, "/v1/completions", one.dump(), false);
        std::uint16_t engine_port = 0;
        int engine_pid = 0;
        std::string key;
        const json status = json::parse(loch::test::http_get(loch_port, "/loch/status").body);
        for (const auto& e : status["engines"])
            if (e["name"] == "bench") {
                engine_port = e["engine"]["port"].get<std::uint16_t>();
                engine_pid = e["engine"]["pid"].get<int>();
                key = engine_key(engine_pid);
            }
        if (!engine_port) throw std::runtime_error("no engine port in /loch/status");

        // nginx in front of the same engine.
        const auto nginx_port = free_port();
        const auto ndir = dir.path() / "nginx";
        fs::create_directories(ndir / "logs");
        std::ofstream(ndir / "nginx.conf")
            << "daemon off;\nmaster_process off;\nworker_processes 1;\nworker_rlimit_nofile 4096;\npid "
            << (ndir / "nginx.pid").string() << ";\nerror_log " << (ndir / "logs/error.log").string()
            << " warn;\nevents { worker_connections 2048; }\nhttp {\n  access_log "
            << (nginx_access_log ? (ndir / "logs/access.log").string() : std::string("off")) << ";\n"
            << "  client_body_temp_path " << (ndir / "body").string() << ";\n  proxy_temp_path "
            << (ndir / "proxy").string() << ";\n  fastcgi_temp_path " << (ndir / "fcgi").string()
            << ";\n  uwsgi_temp_path " << (ndir / "uwsgi").string() << ";\n  scgi_temp_path "
            << (ndir / "scgi").string() << ";\n  upstream engine { server 127.0.0.1:" << engine_port
            << "; keepalive 16; }\n  server {\n    listen 127.0.0.1:" << nginx_port
            << ";\n    keepalive_requests 100000;\n    location / {\n      proxy_pass http://engine;\n"
            << "      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n"
            << "      proxy_set_header Authorization \"Bearer " << key << "\";\n      proxy_buffering off;\n"
            << "      proxy_cache off;\n      proxy_read_timeout 300s;\n    }\n  }\n}\n";
        loch::test::Process ngx(nginx,
                                {"-p", ndir.string(), "-c", (ndir / "nginx.conf").string(), "-e",
                                 (ndir / "logs/error.log").string()},
                                dir.path() / "nginx.out");
        wait_http(nginx_port, "/health", ngx, "nginx");

        std::vector<Target> targets = {{"direct", engine_port, 0, {}},
                                       {"loch", loch_port, loch.pid(), {}},
                                       {"nginx", nginx_port, ngx.pid(), {}}};
        // llama-swap in front of the same engine: `proxy:` is the engine's address, and `cmd` only holds
        // its place (llama-swap starts a model's cmd, then polls the proxy's /health, which is up already).
        // The client sends the engine's secret, which llama-swap forwards with the other headers.
        std::optional<loch::test::Process> swap;
        if (!llama_swap.empty()) {
            const auto swap_port = free_port();
            std::ofstream(dir.path() / "llama-swap.yaml")
                << "healthCheckTimeout: 60\nlogLevel: warn\nmodels:\n  bench:\n    cmd: /bin/sleep 86400\n"
                << "    proxy: http://127.0.0.1:" << engine_port << "\n    checkEndpoint: /health\n";
            swap.emplace(llama_swap,
                         std::vector<std::string>{"--config", (dir.path() / "llama-swap.yaml").string(),
                                                  "--listen", "127.0.0.1:" + std::to_string(swap_port)},
                         dir.path() / "llama-swap.log");
            wait_http(swap_port, "/health", *swap, "llama-swap");
            post(swap_port, "/v1/completions", one.dump(), false, key);  // its model started and proxied
            targets.push_back({"llama-swap", swap_port, swap->pid(), {}});
        }
        const std::size_t n_targets = targets.size();
        const json stream = {
            {"model", "bench"},     {"stream", true},
            {"max_tokens", tokens}, {"ignore_eos", true},
            {"temperature", 0},     {"messages", json::array({{{"role", "user"}, {"content", "Count."}}})}};
        for (int r = 0; r < rounds; ++r)
            for (std::size_t k = 0; k < n_targets; ++k) {
                auto& t = targets[(std::size_t(r) + k) % n_targets];
                // The engine checks its secret: direct requests carry it, and so do llama-swap's (it forwards
                // the client's headers); loch and nginx add it themselves.
                const std::string bearer = t.name == "direct" || t.name == "llama-swap" ? key : std::string();
                Figures f;
                std::string phase = "keep-alive requests";
                try {
                    {
                        KeepAlive c(t.port);
                        std::vector<double> lat;
                        const auto c0 = t.pid ? cpu_ns(t.pid) : 0;
                        const auto k0 = t.pid ? kernel_side(t.pid) : KernelSide{};
                        for (int i = 0; i < requests; ++i) try {
                                lat.push_back(c.request("/v1/completions", one.dump(), false, bearer).back());
                            } catch (const std::exception&) {
                                ++t.errors;
                                c.connect();
                            }
                        if (t.pid) {
                            f.cpu_req_ns = double(cpu_ns(t.pid) - c0) / requests;
                            const auto k1 = kernel_side(t.pid);
                            t.keep_alive.user_ticks += k1.user_ticks - k0.user_ticks;
                            t.keep_alive.kernel_ticks += k1.kernel_ticks - k0.kernel_ticks;
                            t.keep_alive.switches += k1.switches - k0.switches;
                            t.keep_alive_requests += std::uint64_t(requests);
                        }
                        f.ka_p50 = percentile(lat, 50);
                        f.ka_p99 = percentile(lat, 99);
                    }
                    phase = "new-connection requests";
                    {
                        std::vector<double> lat;
                        for (int i = 0; i < requests / 2; ++i) try {
                                lat.push_back(post(t.port, "/v1/completions", one.dump(), false, bearer)
                                                  .arrivals_us.back());
                            } catch (const std::exception&) {
                                ++t.errors;
                            }
                        f.new_p50 = percentile(lat, 50);
                        f.new_p99 = percentile(lat, 99);
                    }
                    phase = "streams";
                    {
                        // A new connection per stream: llama-server closes it after each stream anyway.
                        std::vector<double> gaps;
                        double events = 0;
                        const auto c0 = t.pid ? cpu_ns(t.pid) : 0;
                        for (int i = 0; i < streams; ++i) {
                            std::vector<double> a;
                            try {
                                a = post(t.port, "/v1/chat/completions", stream.dump(), true, bearer)
                                        .arrivals_us;
                            } catch (const std::exception&) {
                                ++t.errors;  // nginx: a POST on an upstream connection the engine closed is a
                                             // 502
                                continue;
                            }
                            for (std::size_t j = 1; j < a.size(); ++j) gaps.push_back(a[j] - a[j - 1]);
                            events += double(a.size());
                        }
                        if (t.pid) f.cpu_event_ns = double(cpu_ns(t.pid) - c0) / std::max(events, 1.0);
                        f.gap_p50 = percentile(gaps, 50);
                    }
                    phase = "32 connections";
                    f.rps32 = throughput(t.port, one.dump(), bearer, 32, 8, &t.errors);
                    phase = "256 connections";
                    f.rps256 = throughput(t.port, one.dump(), bearer, 256, 2, &t.errors);
                } catch (const std::exception& e) {
                    throw std::runtime_error(fmt::format("{}, round {}, {}: {}", t.name, r, phase, e.what()));
                }
                t.rounds.push_back(f);
            }

        // Per round: what loch and nginx add over direct, and loch ÷ nginx of that.
        auto series = [&](const Target& t, double Figures::*m) {
            std::vector<double> v;
            for (const auto& f : t.rounds) v.push_back(f.*m);
            return v;
        };
        auto added = [&](const Target& t, double Figures::*m) {
            std::vector<double> v;
            for (std::size_t i = 0; i < t.rounds.size(); ++i)
                v.push_back(t.rounds[i].*m - targets[0].rounds[i].*m);
            return v;
        };
        // loch ÷ the target `other` (2: nginx, 3: llama-swap), per round, of what each adds over direct (or
        // of their own figures).
        auto ratio_to = [&](std::size_t other, double Figures::*m, bool over_direct) {
            std::vector<double> v;
            for (std::size_t i = 0; i < targets[1].rounds.size(); ++i) {
                const double base = over_direct ? targets[0].rounds[i].*m : 0;
                const double l = targets[1].rounds[i].*m - base, n = targets[other].rounds[i].*m - base;
                if (std::abs(n) > 1e-9) v.push_back(l / n);
            }
            return v.empty() ? std::nan("") : median(v);
        };
        std::printf(
            "proxy-overhead: model %s, engine -t 1, %d rounds; per round and target %d requests "
            "(keep-alive), %d on new connections, %d streams of %d tokens, 32x8 and 256x2 "
            "concurrent; nginx access log %s (loch writes its request log)\n\n",
            fs::path(model).filename().c_str(), rounds, requests, requests / 2, streams, tokens,
            nginx_access_log ? "on" : "off");
        std::printf("%-7s %9s %9s %9s %9s %9s %11s %11s %9s %9s %7s\n", "median", "ka p50", "ka p99",
                    "new p50", "new p99", "gap p50", "cpu/req ns", "cpu/ev ns", "req/s@32", "req/s@256",
                    "errors");
        for (const auto& t : targets)
            std::printf("%-7s %9.0f %9.0f %9.0f %9.0f %9.1f %11.0f %11.0f %9.0f %9.0f %7d\n", t.name.c_str(),
                        median(series(t, &Figures::ka_p50)), median(series(t, &Figures::ka_p99)),
                        median(series(t, &Figures::new_p50)), median(series(t, &Figures::new_p99)),
                        median(series(t, &Figures::gap_p50)), median(series(t, &Figures::cpu_req_ns)),
                        median(series(t, &Figures::cpu_event_ns)), median(series(t, &Figures::rps32)),
                        median(series(t, &Figures::rps256)), t.errors);
        std::printf("\nadded over direct, us (median of rounds):\n%-7s %9s %9s %9s %9s %9s\n", "target",
                    "ka p50", "ka p99", "new p50", "new p99", "gap p50");
        for (std::size_t i = 1; i < targets.size(); ++i) {
            const auto& t = targets[i];
            std::printf("%-7s %9.0f %9.0f %9.0f %9.0f %9.1f\n", t.name.c_str(),
                        median(added(t, &Figures::ka_p50)), median(added(t, &Figures::ka_p99)),
                        median(added(t, &Figures::new_p50)), median(added(t, &Figures::new_p99)),
                        median(added(t, &Figures::gap_p50)));
        }
        for (std::size_t other = 2; other < n_targets; ++other) {
            const auto ratio = [&](double Figures::*m, bool over_direct) {
                return ratio_to(other, m, over_direct);
            };
            std::printf(
                "\nloch ÷ %s, median of per-round ratios (goal ≤ 1.00): added latency keep-alive p50 %.2f, "
                "p99 %.2f; new connection p50 %.2f; per event %.2f; CPU per request %.2f; CPU per event "
                "%.2f; "
                "req/s at 32 connections %.2f, at 256 %.2f (higher is better)\n",
                targets[other].name.c_str(), ratio(&Figures::ka_p50, true), ratio(&Figures::ka_p99, true),
                ratio(&Figures::new_p50, true), ratio(&Figures::gap_p50, true),
                ratio(&Figures::cpu_req_ns, false), ratio(&Figures::cpu_event_ns, false),
                ratio(&Figures::rps32, false), ratio(&Figures::rps256, false));
        }

        // Where a keep-alive request's CPU goes: the kernel's share (the two loopback sends, the sleeps in
        // epoll_wait, which every proxy pays alike) against the proxy's own user space.
        std::printf(
            "\nkeep-alive request, whole run: user / kernel CPU per request (clock ticks of %.0f ms) and "
            "context switches per request\n",
            1000.0 / double(::sysconf(_SC_CLK_TCK)));
        for (std::size_t i = 1; i < n_targets; ++i) {
            const auto& t = targets[i];
            const double per_tick_us = 1e6 / double(::sysconf(_SC_CLK_TCK));
            const double n = double(std::max<std::uint64_t>(t.keep_alive_requests, 1));
            const auto ticks = t.keep_alive.user_ticks + t.keep_alive.kernel_ticks;
            std::printf("%-10s user %6.1f us  kernel %6.1f us  switches %.2f%s\n", t.name.c_str(),
                        double(t.keep_alive.user_ticks) * per_tick_us / n,
                        double(t.keep_alive.kernel_ticks) * per_tick_us / n,
                        double(t.keep_alive.switches) / n,
                        ticks < 50 ? "  (under 50 ticks: the split is rough; --requests 2000 or more)" : "");
        }

        // Cold start: the engine alone, started with the argv loch gave it, against a request to `cold`.
        std::vector<std::string> argv_engine;
        {
            std::ifstream in("/proc/" + std::to_string(engine_pid) + "/cmdline", std::ios::binary);
            std::string a;
            while (std::getline(in, a, '\0')) argv_engine.push_back(a);
        }
        std::vector<double> alone, through;
        std::map<std::string, std::vector<double>> timeline;  // loch's own record of each cold start, µs
        for (int r = 0; r < cold_rounds; ++r) {
            {
                auto args_engine = std::vector<std::string>(argv_engine.begin() + 1, argv_engine.end());
                const auto port = free_port();
                for (std::size_t i = 0; i + 1 < args_engine.size(); ++i)
                    if (args_engine[i] == "--port") args_engine[i + 1] = std::to_string(port);
                const auto t0 = Clock::now();
                loch::test::Process e(argv_engine.front(), args_engine, dir.path() / "alone.log");
                for (;;) {
                    try {
                        if (loch::test::http_get(port, "/health", 1s).status == 200) break;
                    } catch (const std::exception&) {
                    }
                    if (!e.running()) throw std::runtime_error("engine alone died:\n" + e.log_tail());
                    std::this_thread::sleep_for(1ms);
                }
                post(port, "/v1/completions", one.dump(), false);
                alone.push_back(us(Clock::now() - t0));
                e.stop(5s);
            }
            {
                json c = one;
                c["model"] = "cold";
                const auto t0 = Clock::now();
                post(loch_port, "/v1/completions", c.dump(), false);
                through.push_back(us(Clock::now() - t0));
                for (int i = 0; i < 200; ++i) {  // keep_alive 0: wait until loch stopped it
                    const json s = json::parse(loch::test::http_get(loch_port, "/loch/status").body);
                    bool stopped = false;
                    for (const auto& e : s["engines"])
                        if (e["name"] == "cold") {
                            stopped = e["state"] == "stopped";
                            if (stopped && e.contains("last_cold_start"))
                                for (const auto& [phase, v] : e["last_cold_start"].items())
                                    timeline[phase].push_back(v.get<double>() * 1000);
                        }
                    if (stopped) break;
                    std::this_thread::sleep_for(20ms);
                }
            }
        }
        std::printf(
            "\ncold start (request → answer, %d rounds): engine alone %.1f ms, through loch %.1f ms: "
            "loch adds %.1f ms (goal ≤ 5 ms)\n",
            cold_rounds, median(alone) / 1000, median(through) / 1000,
            (median(through) - median(alone)) / 1000);
        // Where loch's part goes (medians of its /loch/status last_cold_start): a regression shows by phase.
        if (!timeline.empty()) {
            std::printf("  loch's timeline (median ms):");
            for (const char* phase : {"devices_read_ms", "planned_ms", "admitted_ms", "engine_ready_ms",
                                      "engine_own_ms", "facts_ms", "granted_ms", "loch_ms", "total_ms"})
                if (timeline.contains(phase)) std::printf(" %s %.2f", phase, median(timeline[phase]) / 1000);
            std::printf("\n");
        }

        // Idle: one model loaded, nothing asked for `settle_s` (loch's tick slows down once nothing happened
        // for 10 ticks), then measured over `idle_s`.
        std::this_thread::sleep_for(std::chrono::duration<double>(settle_s));
        std::vector<std::uint64_t> cpu0;
        for (std::size_t i = 1; i < n_targets; ++i) cpu0.push_back(cpu_ns(targets[i].pid));
        std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));
        std::printf("idle over %.0f s, one model loaded:", idle_s);
        for (std::size_t i = 1; i < n_targets; ++i)
            std::printf("%s %s CPU %.3f %%%s, RSS %.1f MiB", i > 1 ? ";" : "", targets[i].name.c_str(),
                        double(cpu_ns(targets[i].pid) - cpu0[i - 1]) / (idle_s * 1e9) * 100,
                        i == 1 ? " (goal < 0.05 %)" : "", double(rss_bytes(targets[i].pid)) / 1048576);
        std::printf("\n");
        if (swap) swap->stop(5s);
        ngx.stop(5s);
        loch.stop(20s);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "proxy-overhead: %s\n", e.what());
        return 1;
    }
    return 0;
}
