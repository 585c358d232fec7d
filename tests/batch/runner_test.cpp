// batch/runner through fake hooks (no HTTP, no engine): what it sends, how many at once, what it does with
// each kind of answer, preemption, and the files it ends with. The integration suite runs it for real.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "batch/runner.hpp"
#include "support/temp_dir.hpp"

namespace loch::batch {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using nlohmann::json;

class RunnerTest : public ::testing::Test {
  protected:
    asio::io_context ioc;
    asio::thread_pool pool{1};
    test::TempDir dir{"loch-runner"};
    std::shared_ptr<Runner> runner;
    // The fake loch: each item's answer by its custom id and attempt (`sent` counts them).
    std::function<ItemAnswer(const std::string& custom_id, int attempt)> answer = [](const std::string&,
                                                                                     int) {
        return ItemAnswer{200, R"({"object":"chat.completion"})", "", 0};
    };
    std::map<std::string, int> sent;
    int in_flight = 0, max_in_flight = 0;
    bool people_waiting = false;
    std::set<std::string> running, preempted;
    int files = 0;
    std::chrono::milliseconds checkpoint_every = 5000ms;

    void start(unsigned concurrency) {
        RunnerHooks h;
        h.send = [this](std::string, std::string body, std::string) -> asio::awaitable<ItemAnswer> {
            const auto j = json::parse(body);
            // Chat items go streamed with their usage (the sender puts the answer together again).
            if (j.value("stream", false) != true || !j.contains("stream_options") ||
                j["stream_options"].value("include_usage", false) != true)
                ADD_FAILURE() << "a chat item was not sent streamed with its usage: " << body;
            const std::string id = j["messages"][0]["content"];
            const int attempt = ++sent[id];
            max_in_flight = std::max(max_in_flight, ++in_flight);
            asio::steady_timer t(ioc, 5ms);
            while (people_waiting) {  // the broker holds a batch request while people wait
                t.expires_after(5ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            running.insert(id);
            t.expires_after(20ms);
            co_await t.async_wait(asio::use_awaitable);
            running.erase(id);
            --in_flight;
            if (preempted.erase(id))
                co_return ItemAnswer{409, R"({"error":{"type":"cancelled"}})", "cancelled", 0};
            co_return answer(id, attempt);
        };
        h.yields = [this](const std::string&) { return people_waiting; };
        h.preempt = [this](const std::string& request_id) {
            // The request id names the line: the item with that line is the one preempted.
            const auto line = std::stoi(request_id.substr(request_id.rfind('-') + 1));
            const std::string id = "item" + std::to_string(line - 1);
            if (!running.contains(id)) return false;  // not on the engine: nothing to preempt
            preempted.insert(id);
            return true;
        };
        h.cancel = [this](const std::string& request_id) {  // the running item ends as loch's relay ends it
            const auto line = std::stoi(request_id.substr(request_id.rfind('-') + 1));
            const std::string id = "item" + std::to_string(line - 1);
            if (running.contains(id)) preempted.insert(id);
        };
        h.concurrency = [concurrency](const std::string&) { return concurrency; };
        h.rules = [] {
            InputRules r;
            r.url_problem = [](const std::string&) { return std::optional<std::string>(); };
            r.model_problem = [](const std::string&) { return std::optional<std::string>(); };
            return r;
        };
        RunnerOptions o;
        o.dir = dir.path() / "batches";
        o.pass = 10ms;
        o.checkpoint_every = checkpoint_every;
        runner = std::make_shared<Runner>(ioc.get_executor(), pool, o, std::move(h));
        runner->start();
    }

    std::string batch_of(int n) {
        const std::string file_id = "file-in" + std::to_string(++files);
        const auto path = dir.path() / (file_id + ".jsonl");
        std::ofstream out(path);
        for (int i = 0; i < n; ++i)
            out << json{{"custom_id", "item" + std::to_string(i)},
                        {"method", "POST"},
                        {"url", "/v1/chat/completions"},
                        {"body",
                         {{"model", "m"},
                          {"stream", true},
                          {"messages",
                           json::array({{{"role", "user"}, {"content", "item" + std::to_string(i)}}})}}}}
                       .dump()
                << "\n";
        out.close();
        FileRecord f{file_id, "batch", "in.jsonl", std::filesystem::file_size(path), path, 0};
        runner->store().add_file(f);
        return runner->create({file_id, "/v1/chat/completions", "{}", 3600}).id;
    }

    BatchRecord run_to_end(const std::string& id) {
        for (int i = 0; i < 2000; ++i) {
            ioc.run_for(5ms);
            const auto b = runner->store().batch(id);
            if (b->status == BatchStatus::completed || b->status == BatchStatus::cancelled ||
                b->status == BatchStatus::expired || b->status == BatchStatus::failed)
                return *b;
        }
        ADD_FAILURE() << "the batch did not end";
        return *runner->store().batch(id);
    }

    std::vector<json> lines_of(const std::string& file_id) {
        std::vector<json> out;
        if (file_id.empty()) return out;
        std::ifstream in(runner->store().file(file_id)->path);
        for (std::string l; std::getline(in, l);) out.push_back(json::parse(l));
        return out;
    }
};

TEST_F(RunnerTest, EveryItemIsSentOnceAtMostConcurrencyAtATimeAndAnsweredInLineOrder) {
    start(2);
    const auto id = batch_of(12);
    const auto b = run_to_end(id);
    EXPECT_EQ(b.status, BatchStatus::completed);
    EXPECT_EQ(max_in_flight, 2);
    EXPECT_EQ(sent.size(), 12u);
    for (const auto& [item, n] : sent) EXPECT_EQ(n, 1) << item;
    const auto out = lines_of(b.output_file_id);
    ASSERT_EQ(out.size(), 12u);
    for (int i = 0; i < 12; ++i) {
        EXPECT_EQ(out[i]["custom_id"], "item" + std::to_string(i));
        EXPECT_EQ(out[i]["response"]["status_code"], 200);
        EXPECT_EQ(out[i]["response"]["body"]["object"], "chat.completion");
        EXPECT_EQ(out[i]["response"]["request_id"], id + "-" + std::to_string(i + 1) + ".1");
    }
    EXPECT_TRUE(b.error_file_id.empty()) << "an error file with no error in it";
}

// Issue 55: with no batch unfinished the runner does not wake (it passed every 10 ms here before); a batch
// wakes it, runs to the end, and it sleeps again.
TEST_F(RunnerTest, AnIdleRunnerSleepsUntilABatchArrivesAndAfterItEnds) {
    start(2);
    ioc.run_for(200ms);
    EXPECT_LE(runner->passes(), 2u);
    EXPECT_EQ(run_to_end(batch_of(3)).status, BatchStatus::completed);
    ioc.run_for(100ms);  // the last checkpoint, then sleep
    const auto after = runner->passes();
    ioc.run_for(200ms);
    EXPECT_EQ(runner->passes(), after);
}

TEST_F(RunnerTest, TheResultsAreCopiedFromTheStoresLogIntoItsDatabaseByTheWorker) {
    checkpoint_every = 10ms;
    const std::string pad(100 * 1024, 'x');
    answer = [&](const std::string&, int) {
        return ItemAnswer{200, json{{"object", "chat.completion"}, {"pad", pad}}.dump(), "", 0};
    };
    start(4);
    const auto db = dir.path() / "batches" / "batches.sqlite3";
    EXPECT_EQ(run_to_end(batch_of(60)).status, BatchStatus::completed);
    for (int i = 0; i < 400 && std::filesystem::file_size(db) < 6'000'000u; ++i) ioc.run_for(5ms);
    EXPECT_GT(std::filesystem::file_size(db), 6'000'000u) << "the results stayed in the write-ahead log";
}

TEST_F(RunnerTest, AnItemLochWasTooBusyToRunIsRequeuedWithoutAnAttemptAndAFailureIsFinal) {
    answer = [](const std::string& id, int attempt) {
        if (id == "item1" && attempt == 1)
            return ItemAnswer{503, R"({"error":{"type":"queue_full"}})", "queue_full", 0};
        if (id == "item2")
            return ItemAnswer{400, R"({"error":{"type":"invalid_request","message":"bad"}})",
                              "invalid_request", 0};
        return ItemAnswer{200, R"({"object":"chat.completion"})", "", 0};
    };
    start(1);
    const auto id = batch_of(4);
    const auto b = run_to_end(id);
    EXPECT_EQ(sent["item1"], 2);
    EXPECT_EQ(sent["item2"], 1) << "a final answer was retried";
    const auto counts = runner->store().counts(id);
    EXPECT_EQ(counts.done, 3);
    EXPECT_EQ(counts.failed, 1);
    const auto out = lines_of(b.output_file_id);
    EXPECT_EQ(out.size(), 3u);
    const auto err = lines_of(b.error_file_id);
    ASSERT_EQ(err.size(), 1u);
    EXPECT_EQ(err[0]["custom_id"], "item2");
    EXPECT_EQ(err[0]["response"]["status_code"], 400);
    EXPECT_EQ(err[0]["error"]["code"], "invalid_request");
    EXPECT_EQ(err[0]["error"]["message"], "bad");
    // item1 answered on its second send, but that was its first attempt: loch never ran the first.
    EXPECT_EQ(out[1]["response"]["request_id"], id + "-2.1");
    EXPECT_EQ(runner->progress(id)["retried"], 1);
}

TEST_F(RunnerTest, ARunningItemIsPreemptedWhilePeopleWaitAndRunsAgainOnceTheyAreServed) {
    start(1);
    const auto id = batch_of(3);
    // Until the first item is in flight, then a person arrives.
    for (int i = 0; i < 200 && running.empty(); ++i) ioc.run_for(1ms);
    ASSERT_EQ(running.size(), 1u);
    people_waiting = true;
    runner->kick();
    ioc.run_for(60ms);
    EXPECT_EQ(runner->progress(id)["preempted"], 1);
    // The preempted item went back in the queue and was sent again; the broker (not here) holds it while
    // people wait, so what matters is that it ends once, answered.
    people_waiting = false;
    const auto b = run_to_end(id);
    EXPECT_EQ(b.status, BatchStatus::completed);
    EXPECT_EQ(sent["item0"], 2);
    EXPECT_EQ(lines_of(b.output_file_id).size(), 3u);
}

TEST_F(RunnerTest, ACancelledBatchListsTheItemsThatNeverRanAsCancelledAndAStoppedRunnerStartsNothing) {
    start(1);
    const auto id = batch_of(20);
    // Cancelled while an item is on the engine.
    for (int i = 0; i < 400 && (runner->store().counts(id).done < 2 || running.empty()); ++i)
        ioc.run_for(1ms);
    ASSERT_FALSE(running.empty());
    ASSERT_TRUE(runner->cancel(id));
    const auto b = run_to_end(id);
    EXPECT_EQ(b.status, BatchStatus::cancelled);
    const auto out = lines_of(b.output_file_id), err = lines_of(b.error_file_id);
    EXPECT_EQ(out.size() + err.size(), 20u);
    EXPECT_GE(err.size(), 10u);
    int stopped_while_running = 0;
    for (const auto& e : err) {
        EXPECT_EQ(e["error"]["code"], "batch_cancelled");
        const std::string message = e["error"]["message"];
        // The one on the engine at the cancel is said to have been stopped, not never to have run.
        if (message.find("while this request ran") != std::string::npos) {
            ++stopped_while_running;
            EXPECT_FALSE(e["response"].is_null()) << e;
        } else {
            EXPECT_NE(message.find("before this request ran"), std::string::npos) << e;
        }
    }
    EXPECT_EQ(stopped_while_running, 1);
    EXPECT_THROW(runner->cancel(id), std::logic_error);

    const auto second = batch_of(5);
    runner->stop();
    ioc.run_for(100ms);
    EXPECT_EQ(runner->store().counts(second).done, 0) << "a stopped runner started an item";
}

TEST_F(RunnerTest, ABatchCancelledWhileItsItemsAreStillBeingAddedEndsWithEveryItemListed) {
    start(1);
    const auto id = batch_of(5000);  // added in chunks of 2,000, the loop free between them
    ASSERT_TRUE(runner->cancel(id));
    const auto b = run_to_end(id);
    EXPECT_EQ(b.status, BatchStatus::cancelled);
    EXPECT_EQ(lines_of(b.output_file_id).size() + lines_of(b.error_file_id).size(), 5000u)
        << "the batch ended before all its items were in";
}

}  // namespace
}  // namespace loch::batch
