// Several boxes behind HAProxy (issue 30, docs/several-boxes.md): three network namespaces, each a "box"
// running a real `loch serve` with its own CPU budget and real llama-server engines, behind Debian's
// HAProxy started with deploy/haproxy.cfg as it is shipped. Checked: a model that fits one box lands there;
// a resident model keeps its box; a full queue moves traffic to another box; HAProxy's retry turns a box's
// fast 503 into another box's 200; a model that fits no box gets one fast refusal with loch's numbers; a
// box whose loch is killed is down within 2 s and nothing hangs. Every namespace, link and process the test
// made is removed. Needs root (CI runs as root); skipped otherwise.
#include <signal.h>
#include <unistd.h>

#include <future>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "fixtures.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const std::string kKey = "box-test-key";

// `ip` with its arguments; its exit status.
int ip(const test::TempDir& dir, const std::vector<std::string>& args) {
    return run("/usr/sbin/ip", args, dir.path() / "ip.log", 30s).first;
}

// The bridge 10.77.<n>.254 and three namespaces at .1 .2 .3, named after this process (tests may run at
// once on one machine); all removed in the destructor.
class Network {
  public:
    explicit Network(const test::TempDir& dir) : dir_(dir) {
        const std::string id = std::to_string(::getpid() % 100000);
        bridge_ = "lochbr" + id;
        subnet_ = "10.77." + std::to_string(::getpid() % 200 + 20);
        ok_ = ip(dir_, {"link", "add", bridge_, "type", "bridge"}) == 0 &&
              ip(dir_, {"addr", "add", subnet_ + ".254/24", "dev", bridge_}) == 0 &&
              ip(dir_, {"link", "set", bridge_, "up"}) == 0;
        for (int i = 1; ok_ && i <= 3; ++i) {
            const std::string ns = "lochbox" + id + "-" + std::to_string(i);
            const std::string veth = "lb" + id + "v" + std::to_string(i);
            namespaces_.push_back(ns);
            veths_.push_back(veth);
            ok_ = ip(dir_, {"netns", "add", ns}) == 0 &&
                  ip(dir_, {"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns}) == 0 &&
                  ip(dir_, {"link", "set", veth, "master", bridge_, "up"}) == 0 &&
                  ip(dir_, {"-n", ns, "addr", "add", address(i) + "/24", "dev", "eth0"}) == 0 &&
                  ip(dir_, {"-n", ns, "link", "set", "eth0", "up"}) == 0 &&
                  ip(dir_, {"-n", ns, "link", "set", "lo", "up"}) == 0;
        }
    }
    ~Network() {
        for (const auto& v : veths_) ip(dir_, {"link", "del", v});
        for (const auto& ns : namespaces_) ip(dir_, {"netns", "del", ns});
        ip(dir_, {"link", "del", bridge_});
    }
    bool ok() const { return ok_; }
    std::string address(int box) const { return subnet_ + "." + std::to_string(box); }
    const std::string& ns(int box) const { return namespaces_.at(box - 1); }

  private:
    const test::TempDir& dir_;
    std::string bridge_, subnet_;
    std::vector<std::string> namespaces_, veths_;
    bool ok_ = false;
};

// One box: `ip netns exec <ns> loch serve` on <address>:8080 with its agent on :8081.
class Box {
  public:
    Box(const Network& net, int n, const test::TempDir& dir, const std::string& budget,
        const std::string& models)
        : address_(net.address(n)), dir_(dir.path() / ("box" + std::to_string(n))) {
        fs::create_directories(dir_);
        const std::string yaml = "listen: " + address_ + "\nport: 8080\napi_keys: [" + kKey +
                                 "]\nagent: {listen: " + address_ +
                                 ", port: 8081}\nqueue: {interactive: 1}\n"
                                 "state_dir: " +
                                 (dir_ / "state").string() + "\nengine_dir: " + bin().string() +
                                 "\ndevices:\n  cpu: {budget: " + budget + "}\nmodels:\n" + models;
        std::ofstream(dir_ / "loch.yaml") << yaml;
        proc_.emplace("/usr/sbin/ip",
                      std::vector<std::string>{"netns", "exec", net.ns(n), (bin() / "loch").string(), "serve",
                                               "--config", (dir_ / "loch.yaml").string()},
                      dir_ / "loch.log");
        const auto until = std::chrono::steady_clock::now() + 30s;
        while (std::chrono::steady_clock::now() < until && proc_->running()) {
            try {
                if (get("/health").status == 200) return;
            } catch (const std::exception&) {
            }
            std::this_thread::sleep_for(100ms);
        }
        throw std::runtime_error("box " + address_ + " did not come up:\n" + proc_->log_tail());
    }
    ~Box() {
        if (proc_ && proc_->running()) {
            const auto st = proc_->stop(40s);
            if (st.value_or(-1) != 0)
                ADD_FAILURE() << "box " << address_ << " did not exit cleanly:\n" << proc_->log_tail(4000);
        }
    }
    test::HttpResponse get(const std::string& target) {
        test::HttpRequest r;
        r.host = address_;
        r.port = 8080;
        r.target = target;
        r.headers["Authorization"] = "Bearer " + kKey;
        r.timeout = 10s;
        return test::http_request(std::move(r));
    }
    // The model's state on this box ("stopped" when it never ran here).
    std::string state_of(const std::string& model) {
        const auto st = json::parse(get("/loch/status").body);
        for (const auto& e : st.value("engines", json::array()))
            if (e.value("name", "") == model) return e.value("state", "");
        return "unknown";
    }
    int engine_pid(const std::string& model) {
        const auto st = json::parse(get("/loch/status").body);
        for (const auto& e : st.value("engines", json::array()))
            if (e.value("name", "") == model && e.contains("engine") && e["engine"].contains("pid"))
                return e["engine"]["pid"].get<int>();
        return -1;
    }
    // How many of the model's requests this box answered with `status` (its request log).
    int answered(const std::string& model, int status) {
        int n = 0;
        std::ifstream log(dir_ / "state" / "logs" / "requests.jsonl");
        for (std::string l; std::getline(log, l);) {
            const auto r = json::parse(l, nullptr, false);
            n += r.is_object() && r.value("model", "") == model && r.value("status", 0) == status;
        }
        return n;
    }
    int runs_of(const std::string& model) {
        const auto st = json::parse(get("/loch/status").body);
        for (const auto& e : st.value("engines", json::array()))
            if (e.value("name", "") == model) return e.value("runs", 0);
        return -1;
    }
    void kill() {
        ::kill(proc_->pid(), SIGKILL);
        proc_->stop(10s);  // reaps it (and its engines' group)
    }
    std::string log() { return proc_->log(); }

  private:
    std::string address_;
    fs::path dir_;
    std::optional<test::Process> proc_;
};

// Debian's HAProxy on deploy/haproxy.cfg, the boxes' addresses in its environment.
class Balancer {
  public:
    Balancer(const Network& net, const test::TempDir& dir)
        : front_(test::free_port()), stats_(test::free_port()) {
        proc_.emplace(
            "/usr/bin/env",
            std::vector<std::string>{"LOCH_FRONT=127.0.0.1:" + std::to_string(front_),
                                     "LOCH_STATS=127.0.0.1:" + std::to_string(stats_), "LOCH_KEY=" + kKey,
                                     "LOCH_BOX1=" + net.address(1), "LOCH_BOX2=" + net.address(2),
                                     "LOCH_BOX3=" + net.address(3), "/usr/sbin/haproxy", "-db", "-f",
                                     (fs::path(LOCH_SOURCE_DIR) / "deploy/haproxy.cfg").string()},
            dir.path() / "haproxy.log");
        if (answers(*proc_, stats_, "/stats;csv", 20s, 100ms)) return;
        throw std::runtime_error("haproxy did not come up:\n" + proc_->log_tail());
    }
    ~Balancer() {
        if (proc_) proc_->stop(10s);
    }
    test::HttpResponse post(const std::string& body, std::chrono::seconds timeout = 120s) {
        return test::http_post_json(front_, "/v1/chat/completions", body, timeout);
    }
    // Each server's status in a backend from HAProxy's CSV stats ("UP", "DOWN", "DRAIN", "MAINT", …).
    std::map<std::string, std::string> servers(const std::string& backend) {
        std::map<std::string, std::string> out;
        const auto csv = test::http_get(stats_, "/stats;csv", 5s).body;
        std::istringstream in(csv);
        for (std::string line; std::getline(in, line);) {
            std::vector<std::string> f;
            std::istringstream ls(line);
            for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
            if (f.size() > 17 && f[0] == backend && f[1] != "BACKEND" && f[1] != "FRONTEND")
                out[f[1]] = f[17];
        }
        return out;
    }
    std::string log() { return proc_->log(); }

  private:
    std::uint16_t front_, stats_;
    std::optional<test::Process> proc_;
};

std::string ask(const std::string& model, int max_tokens = 4, const std::string& extra = "") {
    return chat(model, false, max_tokens, extra);
}

// Contexts sized for memory, beyond the file's training context (65536): stretched, as loch requires.
std::string entry(const std::string& name, const fs::path& file, int ctx) {
    return "  - name: " + name + "\n    path: " + file.string() +
           "\n    args:\n      ctx: " + std::to_string(ctx) +
           "\n      parallel: 1\n      threads: 1\n      ctx_extension: yarn\n";
}

}  // namespace

TEST(SeveralBoxes, HAProxyWithLochsAgentSendsEachRequestToTheBoxWhereItsModelFits) {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root (CI runs as root)";
    test::TempDir dir("loch-itest-boxes");
    std::optional<Network> net_slot;
    net_slot.emplace(dir);
    Network& net = *net_slot;
    ASSERT_TRUE(net.ok()) << "ip netns / veth / bridge failed: see " << (dir.path() / "ip.log");
    const fs::path file = models().longctx.path();
    // chat: ~80 MiB, fits every box; coder and writer: ~330 MiB, fit box 3 only; huge: ~2 GiB, fits none.
    const std::string models_yaml = entry("chat", file, 4096) + entry("coder", file, 131072) +
                                    entry("writer", file, 131072) + entry("huge", file, 1048576);
    {
        Box b1(net, 1, dir, "250MiB", models_yaml), b2(net, 2, dir, "250MiB", models_yaml),
            b3(net, 3, dir, "600MiB", models_yaml);
        Balancer lb(net, dir);
        std::this_thread::sleep_for(2500ms);  // the agents' first answers (and the models' estimates)

        // A model that fits one box only always lands there.
        for (int i = 0; i < 3; ++i) {
            const auto r = lb.post(ask("coder"));
            ASSERT_EQ(r.status, 200) << r.body << lb.log();
        }
        EXPECT_EQ(b3.state_of("coder"), "ready");
        EXPECT_EQ(b1.runs_of("coder"), 0);
        EXPECT_EQ(b2.runs_of("coder"), 0);

        // A resident model keeps its box: one load, wherever HAProxy chose, then every request there.
        ASSERT_EQ(lb.post(ask("chat")).status, 200);
        std::this_thread::sleep_for(1500ms);  // the agents say where it is now
        for (int i = 0; i < 6; ++i) ASSERT_EQ(lb.post(ask("chat")).status, 200);
        Box* boxes[] = {&b1, &b2, &b3};
        std::vector<int> runs;
        for (Box* b : boxes) runs.push_back(b->runs_of("chat"));
        EXPECT_EQ(std::count(runs.begin(), runs.end(), 1), 1) << "chat loaded on more than one box";
        EXPECT_EQ(std::count(runs.begin(), runs.end(), 0), 2);
        const int home = static_cast<int>(std::find(runs.begin(), runs.end(), 1) - runs.begin());

        // A full queue moves traffic: with chat's engine stopped (SIGSTOP) on its home box, one request
        // holds its slot and one waits (the queue holds one); the agent drains the box, and the next request
        // loads chat on another box.
        const int engine = boxes[home]->engine_pid("chat");
        ASSERT_GT(engine, 0);
        ASSERT_EQ(::kill(engine, SIGSTOP), 0);
        auto first = std::async(std::launch::async, [&] { return lb.post(ask("chat"), 300s); });
        std::this_thread::sleep_for(500ms);
        auto second = std::async(std::launch::async, [&] { return lb.post(ask("chat"), 300s); });
        std::this_thread::sleep_for(2000ms);
        const auto moved = lb.post(ask("chat"));
        ::kill(engine, SIGCONT);
        EXPECT_EQ(moved.status, 200) << moved.body;
        int elsewhere = 0;
        for (int b = 0; b < 3; ++b)
            if (b != home) elsewhere += boxes[b]->runs_of("chat");
        EXPECT_EQ(elsewhere, 1)
            << "the request did not move to another box while the home box's queue was full";
        EXPECT_EQ(first.get().status, 200);
        EXPECT_EQ(second.get().status, 200);

        // A model without a backend of its own goes to any box in turn: boxes 1 and 2 refuse it at once
        // (503, in their request logs), and HAProxy's retry takes it to box 3 (200) — every time.
        for (int i = 0; i < 3; ++i) {
            const auto writer = lb.post(ask("writer"));
            EXPECT_EQ(writer.status, 200) << writer.body;
        }
        EXPECT_EQ(b3.state_of("writer"), "ready");
        EXPECT_GE(b1.answered("writer", 503) + b2.answered("writer", 503), 1)
            << "no box refused writer: HAProxy's retry was not exercised";
        EXPECT_EQ(b1.answered("writer", 200) + b2.answered("writer", 200), 0);

        // A model that fits no box: one fast refusal with loch's numbers.
        const auto t0 = std::chrono::steady_clock::now();
        const auto huge = lb.post(ask("huge"));
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
        EXPECT_EQ(huge.status, 503) << huge.body;
        const auto err = json::parse(huge.body, nullptr, false);
        ASSERT_TRUE(err.is_object()) << "HAProxy's own page, not loch's JSON: " << huge.body;
        EXPECT_EQ(err["error"]["type"], "insufficient_memory");
        EXPECT_GT(err["error"].value("need_bytes", std::uint64_t{0}),
                  err["error"].value("capacity_bytes", std::uint64_t{0}));

        // A box whose loch is killed is down within 2 s, and requests keep being answered.
        Box& victim = home == 0 ? b2 : b1;  // not chat's home
        const std::string vname = &victim == &b1 ? "box1" : "box2";
        victim.kill();
        const auto killed = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - killed < 5s &&
               lb.servers("any_box")[vname].rfind("DOWN", 0) != 0)
            std::this_thread::sleep_for(50ms);
        const double down_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
        EXPECT_LE(down_s, 2.0) << lb.servers("any_box")[vname];
        std::printf("several boxes: chat's home box%d; %s down %.2f s after SIGKILL; refusal of huge: %s\n",
                    home + 1, vname.c_str(), down_s, huge.body.substr(0, 160).c_str());
        for (int i = 0; i < 3; ++i) {
            const auto r = lb.post(ask("chat"), 30s);
            EXPECT_EQ(r.status, 200) << r.body;
        }
    }
    const std::string prefix = net.ns(1).substr(0, net.ns(1).size() - 1);  // "lochbox<pid>-"
    net_slot.reset();
    const auto [rc, left] = run("/usr/sbin/ip", {"netns", "list"}, dir.path() / "ip-list.log", 30s);
    EXPECT_EQ(left.find(prefix), std::string::npos) << "namespaces left behind: " << left;
}
