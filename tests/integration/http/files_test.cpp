// The Batch API's files against a real `loch serve` (issue 29): OpenAI's own Python client uploads, reads,
// lists, downloads and deletes an input file, and gets a bad one back as a 400 with its line numbers; a file
// larger than max_body is streamed to disk (loch's memory does not grow by its size) and survives a restart;
// one over max_batch_file is refused with the key to raise.
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <gtest/gtest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "batch_fixtures.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// The anonymous (heap) memory of a process: what holding an upload in memory would raise.
std::uint64_t rss_anon(int pid) {
    std::ifstream st("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(st, line))
        if (line.starts_with("RssAnon:")) return std::stoull(line.substr(8)) * 1024;
    return 0;
}

// Sends an upload of `text` in two halves and measures how loch's heap grew in between (while it receives);
// the answer's status and body (and its x-should-retry header into `should_retry`, when given).
std::pair<int, std::string> upload_in_halves(LochServer& loch, const std::string& text,
                                             std::int64_t& heap_growth, std::string* should_retry = nullptr) {
    namespace asio = boost::asio;
    namespace http = boost::beast::http;
    asio::io_context ioc;
    asio::ip::tcp::socket sock(ioc);
    sock.connect({asio::ip::make_address("127.0.0.1"), loch.port()});
    const std::string body = form(text);
    const std::string head =
        "POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; "
        "boundary=" +
        kBoundary + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    const auto pid = loch.process().pid();
    const auto before = static_cast<std::int64_t>(rss_anon(pid));
    asio::write(sock, asio::buffer(head));
    asio::write(sock, asio::buffer(body.data(), body.size() / 2));
    std::this_thread::sleep_for(500ms);  // loch has taken the first half
    heap_growth = static_cast<std::int64_t>(rss_anon(pid)) - before;
    asio::write(sock, asio::buffer(body.data() + body.size() / 2, body.size() - body.size() / 2));
    boost::beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(sock, buf, res);
    if (should_retry) *should_retry = std::string(res["x-should-retry"]);
    return {static_cast<int>(res.result_int()), res.body()};
}

}  // namespace

TEST(Files, TheOpenAIClientUploadsReadsListsDownloadsAndDeletesAndABadFileIsRefusedByLine) {
    test::TempDir dir("loch-itest-files");
    LochServer loch(dir.path(), config(dir, "2GiB", model_entry("tiny", models().tiny.path(), kArgs)));
    const auto good =
        write_file(dir, "good.jsonl", chat_item("a", "tiny") + "\n" + chat_item("b", "tiny") + "\n");
    const auto bad = write_file(
        dir, "bad.jsonl",
        chat_item("a", "tiny") + "\n{oops\n" + chat_item("c", "nope") + "\n" + chat_item("a", "tiny") + "\n");
    const auto log = dir.path() / "openai-files.log";
    const int rc =
        test::run_to_completion(python(),
                                {(fs::path(LOCH_SOURCE_DIR) / "tests/peers/openai_files.py").string(),
                                 std::to_string(loch.port()), good.string(), bad.string()},
                                log, 300s);
    std::ifstream in(log);
    const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_EQ(rc, 0) << out;
    const auto end = out.find_last_not_of('\n');
    const auto seen = json::parse(out.substr(out.rfind('\n', end) + 1), nullptr, false);  // its last line
    ASSERT_TRUE(seen.is_object()) << out;
    const auto& refusal = seen["refusal"];
    EXPECT_EQ(refusal["type"], "invalid_request") << out;
    const std::string message = refusal["message"];
    EXPECT_NE(message.find("line 2: not valid JSON"), std::string::npos) << message;
    EXPECT_NE(message.find("line 3: no model named 'nope'"), std::string::npos) << message;
    EXPECT_NE(message.find("line 4: custom_id \"a\" is already used on line 1"), std::string::npos)
        << message;
    ASSERT_EQ(refusal["problems"].size(), 3u) << out;
    EXPECT_EQ(refusal["problems"][1]["line"], 3);
    // Nothing of the refused file was kept; the deleted one is gone from disk too.
    EXPECT_TRUE(fs::is_empty(dir.path() / "state" / "batches" / "files"));
    EXPECT_TRUE(fs::is_empty(dir.path() / "state" / "batches" / "tmp"));
}

TEST(Files, AFileLargerThanMaxBodyIsStreamedToDiskSurvivesARestartAndOneOverTheLimitIsRefused) {
    test::TempDir dir("loch-itest-files");
    const auto cfg =
        config(dir, "2GiB", model_entry("tiny", models().tiny.path(), kArgs), "max_batch_file: 64MiB\n");
    std::optional<LochServer> loch;
    loch.emplace(dir.path(), cfg);
    // 40 MiB of items (each with a 4 KiB caption prompt): over max_body (16 MiB), under max_batch_file.
    std::string text;
    const std::string pad(4096, 'x');
    for (int i = 0; text.size() < 40u << 20; ++i)
        text += chat_item("i" + std::to_string(i), "tiny", pad) + "\n";
    std::int64_t heap_growth = 0;
    const auto late_wakes = [&] {
        return json::parse(loch->get("/loch/status").body)["event_loop"]["late_wakes"];
    };
    const std::uint64_t late_before = late_wakes();
    const auto [status, body] = upload_in_halves(*loch, text, heap_growth);
    ASSERT_EQ(status, 200) << body.substr(0, 2000);
    // Checking 40 MiB of JSON lines takes a good part of a second: on the worker pool, not on loch's thread
    // (a wake 250 ms late would be counted).
    EXPECT_EQ(late_wakes(), late_before) << "the upload's check blocked loch's event loop";
    // Half of it (20 MiB) had arrived: held in memory, the heap would have grown by that much.
    EXPECT_LT(heap_growth, 8 << 20) << "the upload is being held in memory";
    const auto file = json::parse(body);
    EXPECT_EQ(file["bytes"], text.size());
    EXPECT_EQ(file["object"], "file");
    const std::string id = file["id"];

    const auto port = loch->port();
    loch.reset();
    loch.emplace(dir.path(), cfg, std::vector<std::string>{}, port);
    const auto got = loch->get("/v1/files/" + id);
    ASSERT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(json::parse(got.body)["bytes"], text.size());
    const auto content = loch->get("/v1/files/" + id + "/content");
    ASSERT_EQ(content.status, 200);
    EXPECT_TRUE(content.body == text) << "the content after a restart differs from the upload";

    // Over max_batch_file: refused from the header, naming the key to raise; a wrong purpose is refused too.
    loch.reset();
    loch.emplace(dir.path(), config(dir, "2GiB", model_entry("tiny", models().tiny.path(), kArgs),
                                    "max_batch_file: 1MiB\n"));
    const auto huge = upload(*loch, std::string(2u << 20, 'x'));
    EXPECT_EQ(huge.status, 413) << huge.body.substr(0, 500);
    EXPECT_NE(huge.body.find("max_batch_file"), std::string::npos) << huge.body.substr(0, 500);
    const auto other = upload(*loch, chat_item("a", "tiny") + "\n", "fine-tune");
    EXPECT_EQ(other.status, 400) << other.body;
    EXPECT_NE(other.body.find("purpose must be"), std::string::npos) << other.body;
}

// A full disk mid-upload: 507 insufficient_storage with the figures and where the room is needed (not a
// 500, not a reset connection), nothing half-written kept, and loch goes on answering. The disk is a 2 MiB
// tmpfs over the upload folder: it needs mount(2), so the test is skipped where loch's tests are not root.
TEST(Files, AnUploadThatFillsTheDiskIsRefusedWith507AndTheFreeBytes) {
    test::TempDir dir("loch-itest-files");
    const auto tmp = dir.path() / "state" / "batches" / "tmp";
    fs::create_directories(tmp);
    if (::mount("tmpfs", tmp.c_str(), "tmpfs", 0, "size=2m") != 0)
        GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno) << "): needs root";
    struct Unmount {
        fs::path p;
        ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
    } unmount{tmp};
    LochServer loch(dir.path(), config(dir, "2GiB", model_entry("tiny", models().tiny.path(), kArgs),
                                       "max_batch_file: 64MiB\n"));
    std::string text;
    const std::string pad(4096, 'x');
    for (int i = 0; text.size() < 6u << 20; ++i)
        text += chat_item("i" + std::to_string(i), "tiny", pad) + "\n";
    std::int64_t heap_growth = 0;
    std::string should_retry;
    const auto [status, body] = upload_in_halves(loch, text, heap_growth, &should_retry);
    EXPECT_EQ(status, 507) << body.substr(0, 2000);
    EXPECT_EQ(should_retry, "false") << "the SDKs would retry into the same full disk";
    const auto e = json::parse(body, nullptr, false);
    ASSERT_TRUE(e.is_object()) << body.substr(0, 2000);
    EXPECT_EQ(e["error"]["type"], "insufficient_storage") << body;
    EXPECT_TRUE(e["error"]["free_bytes"].is_number()) << body;
    EXPECT_GE(e["error"]["received_bytes"].get<std::uint64_t>(), 2u << 20) << body;
    EXPECT_NE(e["error"]["message"].get<std::string>().find("state_dir"), std::string::npos) << body;
    EXPECT_TRUE(fs::is_empty(tmp)) << "the half-written upload was kept";
    EXPECT_EQ(test::http_get(loch.port(), "/health", 2s).status, 200);
    EXPECT_EQ(json::parse(loch.get("/v1/files").body)["data"].size(), 0u);
}
