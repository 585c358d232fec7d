// bench/proxy-overhead — what loch adds on the request path, next to nginx doing the same job.
//
// One llama-server (the engine loch starts on demand) is measured three ways in one run, interleaved request
// by request so that load from elsewhere hits all three alike: directly, through `loch serve`, and through
// nginx (reverse proxy with upstream keep-alive and proxy_buffering off — the fair setup for SSE).
// Reported: added p50/p99 latency of a whole non-streamed request; added p50/p99 time to first event and
// gap between streamed events; events/s; and loch's added latency as a ratio to nginx's.
//
//   build/bin/proxy-overhead [--model X.gguf] [--requests 200] [--streams 30] [--tokens 64]
// Without --model it generates the loch-synth `tiny-llama` model (fast tokens: the proxy's share is largest).
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
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

StreamTimes post(std::uint16_t port, const std::string& target, const std::string& body, bool stream,
                 const std::string& bearer = {}) {
    asio::io_context ioc;
    asio::ip::tcp::socket sock(ioc);
    sock.connect({asio::ip::make_address("127.0.0.1"), port});
    sock.set_option(asio::ip::tcp::no_delay(true));
    timeval tv{60, 0};
    ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    bhttp::request<bhttp::string_body> req{bhttp::verb::post, target, 11};
    req.set(bhttp::field::host, "127.0.0.1");
    req.set(bhttp::field::content_type, "application/json");
    if (!bearer.empty()) req.set(bhttp::field::authorization, "Bearer " + bearer);
    req.body() = body;
    req.prepare_payload();
    const auto t0 = Clock::now();
    bhttp::write(sock, req);
    boost::beast::flat_buffer buf;
    bhttp::response_parser<bhttp::buffer_body> parser;
    parser.body_limit(boost::none);
    bhttp::read_header(sock, buf, parser);
    if (parser.get().result_int() != 200)
        throw std::runtime_error(fmt::format("port {}: HTTP {}", port, parser.get().result_int()));
    StreamTimes out;
    loch::http::SseFramer framer;
    char tmp[8192];
    while (!parser.is_done()) {
        parser.get().body().data = tmp;
        parser.get().body().size = sizeof tmp;
        boost::beast::error_code ec;
        bhttp::read_some(sock, buf, parser, ec);
        if (ec == bhttp::error::need_buffer) ec = {};
        if (ec) throw boost::system::system_error(ec);
        const auto now = Clock::now();
        if (stream)
            for (auto& e : framer.feed(std::string_view(tmp, sizeof tmp - parser.get().body().size))) {
                (void)e;
                out.arrivals_us.push_back(us(now - t0));
            }
    }
    if (!stream) out.arrivals_us.push_back(us(Clock::now() - t0));
    return out;
}

struct Target {
    std::string name;
    std::uint16_t port;
    std::vector<double> request_us, first_event_us, gap_us;
    double events = 0, stream_seconds = 0;
};

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

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"proxy-overhead: latency loch adds, next to nginx"};
    std::string model;
    int requests = 200, streams = 30, tokens = 64;
    std::string bin_dir = fs::canonical("/proc/self/exe").parent_path().string();
    std::string nginx = "/usr/sbin/nginx";
    app.add_option("--model", model, "GGUF model (default: generate loch-synth tiny-llama)");
    app.add_option("--requests", requests, "non-streamed requests per target");
    app.add_option("--streams", streams, "streamed requests per target");
    app.add_option("--tokens", tokens, "tokens per streamed request");
    app.add_option("--bin", bin_dir, "folder with loch, loch-synth, llama-server");
    app.add_option("--nginx", nginx, "nginx binary");
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
        // loch, serving the model; its engine is the one all three targets reach.
        const auto loch_port = free_port();
        std::ofstream(dir.path() / "loch.yaml")
            << "listen: 127.0.0.1\nstate_dir: " << (dir.path() / "state").string()
            << "\nengine_dir: " << bin_dir
            << "\ndevices:\n  cpu:\n    budget: 4GiB\nmodels:\n  - name: bench\n    path: " << model
            << "\n    keep_alive: forever\n    args:\n      ctx: 2048\n      parallel: 1\n";
        loch::test::Process loch(
            bin / "loch",
            {"serve", "--config", (dir.path() / "loch.yaml").string(), "--port", std::to_string(loch_port)},
            dir.path() / "loch.log");
        wait_http(loch_port, "/health", loch, "loch");
        const json warm = {{"model", "bench"}, {"prompt", "Hi"}, {"max_tokens", 1}, {"temperature", 0}};
        post(loch_port, "/v1/completions", warm.dump(), false);
        std::uint16_t engine_port = 0;
        std::string key;
        const json status = json::parse(loch::test::http_get(loch_port, "/loch/status").body);
        for (const auto& e : status["engines"])
            if (e["name"] == "bench") {
                engine_port = e["engine"]["port"].get<std::uint16_t>();
                key = engine_key(e["engine"]["pid"].get<int>());
            }
        if (!engine_port) throw std::runtime_error("no engine port in /loch/status");

        // nginx in front of the same engine.
        const auto nginx_port = free_port();
        const auto ndir = dir.path() / "nginx";
        fs::create_directories(ndir / "logs");
        std::ofstream(ndir / "nginx.conf")
            << "daemon off;\nmaster_process off;\nworker_processes 1;\npid " << (ndir / "nginx.pid").string()
            << ";\nerror_log " << (ndir / "logs/error.log").string()
            << " warn;\nevents { worker_connections 256; }\nhttp {\n  access_log off;\n"
            << "  client_body_temp_path " << (ndir / "body").string() << ";\n  proxy_temp_path "
            << (ndir / "proxy").string() << ";\n  fastcgi_temp_path " << (ndir / "fcgi").string()
            << ";\n  uwsgi_temp_path " << (ndir / "uwsgi").string() << ";\n  scgi_temp_path "
            << (ndir / "scgi").string() << ";\n  upstream engine { server 127.0.0.1:" << engine_port
            << "; keepalive 8; }\n  server {\n    listen 127.0.0.1:" << nginx_port
            << ";\n    location / {\n      proxy_pass http://engine;\n      proxy_http_version 1.1;\n"
            << "      proxy_set_header Connection \"\";\n      proxy_set_header Authorization \"Bearer "
            << key << "\";\n      proxy_buffering off;\n      proxy_cache off;\n"
            << "      proxy_read_timeout 300s;\n    }\n  }\n}\n";
        loch::test::Process ngx(nginx,
                                {"-p", ndir.string(), "-c", (ndir / "nginx.conf").string(), "-e",
                                 (ndir / "logs/error.log").string()},
                                dir.path() / "nginx.out");
        wait_http(nginx_port, "/health", ngx, "nginx");

        std::vector<Target> targets = {{"direct", engine_port, {}, {}, {}},
                                       {"loch", loch_port, {}, {}, {}},
                                       {"nginx", nginx_port, {}, {}, {}}};
        const json one = {{"model", "bench"}, {"prompt", "Hi"}, {"max_tokens", 1}, {"temperature", 0}};
        const json stream = {
            {"model", "bench"},     {"stream", true},
            {"max_tokens", tokens}, {"ignore_eos", true},
            {"temperature", 0},     {"messages", json::array({{{"role", "user"}, {"content", "Count."}}})}};
        // Interleaved, rotating the order each round.
        for (int r = 0; r < requests; ++r)
            for (int k = 0; k < 3; ++k) {
                auto& t = targets[(r + k) % 3];
                const std::string bearer = t.port == engine_port ? key : std::string();
                t.request_us.push_back(
                    post(t.port, "/v1/completions", one.dump(), false, bearer).arrivals_us.back());
            }
        for (int r = 0; r < streams; ++r)
            for (int k = 0; k < 3; ++k) {
                auto& t = targets[(r + k) % 3];
                const auto times = post(t.port, "/v1/chat/completions", stream.dump(), true,
                                        t.port == engine_port ? key : std::string());
                if (times.arrivals_us.empty()) continue;
                t.first_event_us.push_back(times.arrivals_us.front());
                for (std::size_t i = 1; i < times.arrivals_us.size(); ++i)
                    t.gap_us.push_back(times.arrivals_us[i] - times.arrivals_us[i - 1]);
                t.events += double(times.arrivals_us.size());
                t.stream_seconds += times.arrivals_us.back() / 1e6;
            }

        const auto& d = targets[0];
        std::printf(
            "proxy-overhead: model %s, %d requests and %d streams of %d tokens per target, interleaved\n",
            fs::path(model).filename().c_str(), requests, streams, tokens);
        std::printf("%-7s %12s %12s %12s %12s %12s %12s %10s\n", "target", "req p50 us", "req p99 us",
                    "1st ev p50", "1st ev p99", "gap p50 us", "gap p99 us", "events/s");
        for (const auto& t : targets)
            std::printf("%-7s %12.0f %12.0f %12.0f %12.0f %12.1f %12.1f %10.1f\n", t.name.c_str(),
                        percentile(t.request_us, 50), percentile(t.request_us, 99),
                        percentile(t.first_event_us, 50), percentile(t.first_event_us, 99),
                        percentile(t.gap_us, 50), percentile(t.gap_us, 99),
                        t.events / std::max(t.stream_seconds, 1e-9));
        std::printf("\nadded over direct (us):\n%-7s %12s %12s %12s %12s %12s %12s %10s\n", "target",
                    "req p50", "req p99", "1st ev p50", "1st ev p99", "gap p50", "gap p99", "events/s %");
        std::map<std::string, std::vector<double>> added;
        for (std::size_t i = 1; i < targets.size(); ++i) {
            const auto& t = targets[i];
            std::vector<double> a = {percentile(t.request_us, 50) - percentile(d.request_us, 50),
                                     percentile(t.request_us, 99) - percentile(d.request_us, 99),
                                     percentile(t.first_event_us, 50) - percentile(d.first_event_us, 50),
                                     percentile(t.first_event_us, 99) - percentile(d.first_event_us, 99),
                                     percentile(t.gap_us, 50) - percentile(d.gap_us, 50),
                                     percentile(t.gap_us, 99) - percentile(d.gap_us, 99),
                                     100.0 * (t.events / t.stream_seconds) / (d.events / d.stream_seconds)};
            added[t.name] = a;
            std::printf("%-7s %12.0f %12.0f %12.0f %12.0f %12.1f %12.1f %10.1f\n", t.name.c_str(), a[0], a[1],
                        a[2], a[3], a[4], a[5], a[6]);
        }
        const auto& l = added["loch"];
        const auto& n = added["nginx"];
        auto ratio = [](double a, double b) {
            return std::abs(b) < 1.0 ? std::string("n/a (nginx adds < 1 us)") : fmt::format("{:.2f}", a / b);
        };
        std::printf(
            "\nloch ÷ nginx (added latency): request p50 %s, p99 %s; first event p50 %s, p99 %s; "
            "event gap p50 %s, p99 %s; events/s %.3f\n",
            ratio(l[0], n[0]).c_str(), ratio(l[1], n[1]).c_str(), ratio(l[2], n[2]).c_str(),
            ratio(l[3], n[3]).c_str(), ratio(l[4], n[4]).c_str(), ratio(l[5], n[5]).c_str(), l[6] / n[6]);
        ngx.stop(5s);
        loch.stop(20s);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "proxy-overhead: %s\n", e.what());
        return 1;
    }
    return 0;
}
