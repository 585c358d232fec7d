// The request log's line (to_json_line, written without a DOM) is the record's JSON object exactly: every
// field, odd strings (quotes, backslashes, control characters, UTF-8, invalid UTF-8) and odd numbers.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "observe/request_log.hpp"
#include "observe/request_record.hpp"
#include "support/temp_dir.hpp"

using namespace loch::observe;

namespace {

RequestRecord full() {
    RequestRecord r;
    r.id = "5f090c-17";
    r.model = "qwen2.5-7b";
    r.route = "/v1/chat/completions";
    r.priority = "batch";
    r.stream = true;
    r.queue_wait_s = 0.089;
    r.decision = "cold start on cpu: fits on cpu: needs 133.4 MiB, 22.78 GiB free";
    r.ttft_s = 0.25;
    r.prompt_tokens = 1234;
    r.completion_tokens = 77;
    r.seconds_per_step = 1.5;
    r.real_time_factor = 0.03;
    r.duration_s = 3.0;  // a whole number of seconds: written as a number all the same
    r.status = 200;
    return r;
}

void expect_same(const RequestRecord& r) {
    const std::string line = to_json_line(r);
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    const auto parsed = nlohmann::json::parse(line);  // throws (fails the test) when it is not JSON
    EXPECT_EQ(parsed, to_json(r)) << line;
}

}  // namespace

TEST(RequestRecordLine, EveryFieldParsesBackToTheRecordsObject) {
    expect_same(full());
    RequestRecord bare;  // nothing optional, nothing named
    expect_same(bare);
    auto failed = full();
    failed.error_type = "engine_failed";
    failed.status = 502;
    failed.client_gone = true;
    expect_same(failed);
}

TEST(RequestRecordLine, AnErrorStatusIsNeverAnOkOutcome) {
    RequestRecord r = full();
    EXPECT_EQ(r.outcome(), "ok");
    r.status = 500;  // relayed from the engine, no type named
    EXPECT_EQ(r.outcome(), "http_500");
    r.error_type = "engine_failed";
    EXPECT_EQ(r.outcome(), "engine_failed");
    r.client_gone = true;
    EXPECT_EQ(r.outcome(), "client_gone");
}

TEST(RequestRecordLine, OddStringsAreEscapedAndInvalidUtf8Replaced) {
    auto r = full();
    r.model = "quote\" back\\slash";
    r.decision = std::string("tab\there, newline\nthere, nul ") + '\0' + " bell \x07 del \x7f";
    r.route = "/v1/caf\xc3\xa9/\xe2\x9c\x93";
    r.error_type = "bad \xff\xfe utf-8";
    const std::string line = to_json_line(r);
    const auto parsed = nlohmann::json::parse(line);
    EXPECT_EQ(parsed["model"], r.model);
    EXPECT_EQ(parsed["decision"], r.decision);
    EXPECT_EQ(parsed["route"], r.route);
    EXPECT_EQ(parsed["error_type"], "bad \xef\xbf\xbd\xef\xbf\xbd utf-8");  // U+FFFD for each bad byte
    EXPECT_EQ(parsed, nlohmann::json::parse(
                          to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
}

TEST(RequestRecordLine, NumbersRoundTripAndNonFiniteOnesAreNull) {
    auto r = full();
    r.queue_wait_s = 1e-7;
    r.duration_s = 123456.789012345;
    r.ttft_s = std::numeric_limits<double>::quiet_NaN();
    r.seconds_per_step = std::numeric_limits<double>::infinity();
    r.prompt_tokens = std::numeric_limits<std::uint64_t>::max();
    const auto parsed = nlohmann::json::parse(to_json_line(r));
    EXPECT_EQ(parsed["queue_wait_s"].get<double>(), 1e-7);
    EXPECT_EQ(parsed["duration_s"].get<double>(), 123456.789012345);
    EXPECT_TRUE(parsed["ttft_s"].is_null());
    EXPECT_TRUE(parsed["seconds_per_step"].is_null());
    EXPECT_EQ(parsed["prompt_tokens"].get<std::uint64_t>(), std::numeric_limits<std::uint64_t>::max());
}

TEST(RequestLog, WritesOneParsableLinePerRecord) {
    loch::test::TempDir dir("loch-request-log");
    const auto file = dir.path() / "requests.jsonl";
    {
        RequestLog log(file);
        log.write(full());
        auto odd = full();
        odd.model = "line\nbreak";
        log.write(odd);
    }
    std::ifstream in(file);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        EXPECT_EQ(j["id"], "5f090c-17");
        ++n;
    }
    EXPECT_EQ(n, 2);
}

namespace {
std::size_t lines_of(const std::filesystem::path& f) {
    std::ifstream in(f);
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) {
        EXPECT_NO_THROW((void)nlohmann::json::parse(line)) << line;
        ++n;
    }
    return n;
}
}  // namespace

TEST(RequestLog, LinesWaitInMemoryUntilAFlushAndWriteSaysWhenOneIsDue) {
    loch::test::TempDir dir("loch-request-log");
    const auto file = dir.path() / "requests.jsonl";
    RequestLog log(file);
    EXPECT_TRUE(log.write(full()));   // the first pending line: the owner must schedule a flush
    EXPECT_FALSE(log.write(full()));  // already due
    EXPECT_EQ(lines_of(file), 0u);    // nothing written on the request path
    EXPECT_GT(log.pending(), 0u);
    log.flush();
    EXPECT_EQ(log.pending(), 0u);
    log.wait_written();
    EXPECT_EQ(lines_of(file), 2u);
    EXPECT_TRUE(log.write(full()));  // due again after a flush
    log.flush();
    log.wait_written();
    EXPECT_EQ(lines_of(file), 3u);
}

TEST(RequestLog, FlushesItselfWhenTheBufferIsFullAndWhenDestroyed) {
    loch::test::TempDir dir("loch-request-log");
    const auto file = dir.path() / "requests.jsonl";
    {
        RequestLog log(file, 64ull << 20, /*flush_at=*/3);
        EXPECT_TRUE(log.write(full()));
        EXPECT_FALSE(log.write(full()));
        EXPECT_FALSE(log.write(full()));  // the third fills the batch: written now
        EXPECT_EQ(log.pending(), 0u);
        log.wait_written();
        EXPECT_EQ(lines_of(file), 3u);
        EXPECT_TRUE(log.write(full()));
        log.wait_written();
        EXPECT_EQ(lines_of(file), 3u);
    }
    EXPECT_EQ(lines_of(file), 4u);  // the destructor (loch's shutdown) wrote the pending one
}

TEST(RequestLog, RotatesAtItsLimitKeepingOneOldFileOfWholeLines) {
    loch::test::TempDir dir("loch-request-log");
    const auto file = dir.path() / "requests.jsonl";
    const std::size_t one = to_json_line(full()).size() + 1;
    {
        RequestLog log(file, /*rotate_at=*/one * 2 + 1);
        for (int i = 0; i < 2; ++i) log.write(full());
        log.flush();  // 2 lines: at the limit, not over it
        log.write(full());
        log.flush();  // a third would pass it: the file is rotated first
    }
    EXPECT_EQ(lines_of(file.string() + ".1"), 2u);
    EXPECT_EQ(lines_of(file), 1u);
}

// A FIFO whose reader comes late stands for a disk that makes write(2) wait (dirty-page throttling): the
// flush returns at once, the writer thread waits, and every line arrives whole and in order. Written on the
// caller's thread (loch's loop), the flush would take the reader's whole delay.
TEST(RequestLog, AFlushNeverWaitsForTheDisk) {
    loch::test::TempDir dir("loch-request-log");
    const auto fifo = dir.path() / "requests.jsonl";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const int rfd =
        ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // so the log's open goes through
    ASSERT_GE(rfd, 0);
    std::string got;
    std::thread reader;
    std::chrono::steady_clock::duration flush_took{};
    {
        RequestLog log(fifo, 64ull << 30, 64ull << 30);
        for (int i = 0; i < 2000; ++i) log.write(full());  // ~1 MB: the pipe holds 64 KiB
        reader = std::thread([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            ::fcntl(rfd, F_SETFL, 0);  // blocking reads from here on, until the log closes its end
            char buf[65536];
            for (ssize_t n; (n = ::read(rfd, buf, sizeof buf)) > 0;)
                got.append(buf, static_cast<std::size_t>(n));
        });
        const auto t0 = std::chrono::steady_clock::now();
        log.flush();
        flush_took = std::chrono::steady_clock::now() - t0;
    }
    reader.join();
    ::close(rfd);
    EXPECT_LT(flush_took, std::chrono::milliseconds(250)) << "the flush waited for the disk";
    std::size_t lines = 0;
    for (std::size_t at = 0, nl; (nl = got.find('\n', at)) != std::string::npos; at = nl + 1, ++lines)
        EXPECT_NO_THROW((void)nlohmann::json::parse(got.substr(at, nl - at)));
    EXPECT_EQ(lines, 2000u);
}

TEST(RequestLog, WithoutAFileNothingIsPending) {
    RequestLog log;
    EXPECT_FALSE(log.write(full()));
    EXPECT_EQ(log.pending(), 0u);
}
