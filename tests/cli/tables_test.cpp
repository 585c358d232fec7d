// `loch ps` and `loch status` text from /loch/status JSON.
#include <gtest/gtest.h>

#include "cli/tables.hpp"

using namespace loch::cli;

namespace {
const auto kStatus = nlohmann::json::parse(R"({
  "devices":[{"device":"cpu","total":{"bytes":25769803776,"source":"measured"},"capacity_bytes":1073741824,
              "own_bytes":419430400,"outside_bytes":0,"free_bytes":654311424,
              "reservations":[{"engine":"chat","figure":{"bytes":419430400,"source":"configured"}}],
              "other_processes":[{"pid":4123,"user":"alice","command":"python train.py","bytes":1073741824}]}],
  "engines":[{"name":"chat","state":"ready","device":"cpu","active_requests":0,"slots":1,"idle_s":30,
              "keep_alive_s":300,"reservation":{"bytes":419430400,"source":"configured"}},
             {"name":"batch","state":"stopped","active_requests":0,"slots":1,
              "footprint":{"source":"formula","needs":[{"bytes":1048576}]}},
             {"name":"off","state":"stopped","active_requests":0,"slots":1}],
  "queue":{"interactive":0,"batch":1,"limits":{"interactive":64,"batch":256},
           "waiting":[{"model":"batch","request":"5f0-9","priority":"batch","waited_s":4,"reason":"waiting for 1 MiB on cpu"},
                      {"hold":"hold-2","job":"scan","priority":"batch","waited_s":2,"reason":"held by chat","eta_s":30}]},
  "holds":[{"id":"hold-1","name":"train","state":"granted","device":"cpu","bytes":2147483648,
            "source":"configured","command":"python train.py","held_s":90},
           {"id":"hold-2","name":"scan","state":"waiting","bytes":1048576,"source":"measured-earlier",
            "position":1,"reason":"held by chat","eta_s":30}],
  "requests":{"chat":{"count":7}},
  "in_flight":[{"id":"5f0-9","model":"batch","route":"/v1/chat/completions","state":"queued","age_s":4,
                "cancellable":true}],
  "batches":[{"id":"batch_ab12","status":"in_progress","total":51414,"done":20000,"failed":3,"running":2,
              "queued":31409,"preempted":5,"items_per_minute":30.5,"eta_s":61800,"eta_basis":"…"}],
  "events":[{"at":"2026-12-01T00:00:00Z","kind":"ready","model":"chat","message":"ready on cpu"}]})");
}

TEST(Tables, PsListsRunningAndWaitingModelsWithMemorySourceAndUntil) {
    const auto t = ps_table(kStatus, false);
    EXPECT_NE(t.find("NAME"), std::string::npos);
    EXPECT_NE(t.find("400.0 MiB (configured)"), std::string::npos) << t;
    EXPECT_NE(t.find("in 4 min"), std::string::npos) << t;  // 300 - 30 s of keep-alive left
    EXPECT_NE(t.find("0/1, 7 done"), std::string::npos) << t;
    EXPECT_NE(t.find("batch"), std::string::npos) << t;  // stopped, but a request waits for it
    EXPECT_NE(t.find("+1 waiting"), std::string::npos) << t;
    EXPECT_EQ(t.find("off"), std::string::npos) << t;
    EXPECT_NE(ps_table(kStatus, true).find("off"), std::string::npos);
}

TEST(Tables, PsListsJobsWithTheirMemoryCommandAndQueuePosition) {
    const auto t = ps_table(kStatus, false);
    EXPECT_NE(t.find("job train (hold-1)"), std::string::npos) << t;
    EXPECT_NE(t.find("2.00 GiB (configured)"), std::string::npos) << t;
    EXPECT_NE(t.find("python train.py"), std::string::npos) << t;
    EXPECT_NE(t.find("position 1, ETA 30 s: held by chat"), std::string::npos) << t;
    EXPECT_NE(status_text(kStatus).find("job scan hold-2 (batch, 2 s, ETA 30 s): held by chat"),
              std::string::npos)
        << status_text(kStatus);
    EXPECT_NE(status_text(kStatus).find("other: python train.py"), std::string::npos) << status_text(kStatus);
    EXPECT_NE(status_text(kStatus).find("pid 4123, alice"), std::string::npos) << status_text(kStatus);
}

TEST(Tables, StatusShowsTheLedgerTheQueueReasonsAndEvents) {
    const auto t = status_text(kStatus);
    EXPECT_NE(t.find("cpu: total 24.00 GiB (measured)"), std::string::npos) << t;
    EXPECT_NE(t.find("configured"), std::string::npos);
    EXPECT_NE(t.find("batch 5f0-9 (batch, 4 s, ETA unknown): waiting for 1 MiB on cpu"), std::string::npos)
        << t;
    EXPECT_NE(t.find("ready 'chat': ready on cpu"), std::string::npos) << t;
}

TEST(Tables, StatusShowsEachUnfinishedBatchsProgressThroughputAndEta) {
    const auto t = status_text(kStatus);
    EXPECT_NE(
        t.find("batch_ab12 in_progress: 20000/51414 done, 3 failed, 2 running, 31409 queued; 30.5 items/min; "
               "done in about 17.2 h"),
        std::string::npos)
        << t;
    EXPECT_NE(t.find("(5 preempted for interactive requests)"), std::string::npos) << t;
}

TEST(Tables, StatusListsRequestsInFlightByTheIdLochCancelTakesAndPsAllNamesOtherPrograms) {
    const auto t = status_text(kStatus);
    EXPECT_NE(t.find("requests in flight:"), std::string::npos) << t;
    EXPECT_NE(t.find("5f0-9"), std::string::npos) << t;
    EXPECT_NE(t.find("queued   batch /v1/chat/completions (4 s)"), std::string::npos) << t;
    const auto all = ps_table(kStatus, true);
    EXPECT_NE(all.find("other: python train.py"), std::string::npos) << all;
    EXPECT_NE(all.find("pid 4123, alice"), std::string::npos) << all;
    EXPECT_EQ(ps_table(kStatus, false).find("pid 4123"), std::string::npos);
}

namespace loch::cli {
namespace {

// Another program's command line (or a job's) is clipped: the tables stay about as wide as with a short one.
TEST(Tables, ALongCommandLineDoesNotWidenTheTables) {
    const auto widest = [](const std::string& text) {
        std::size_t w = 0, start = 0;
        for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
            w = std::max(w, nl - start);
        return w;
    };
    auto status = kStatus;
    const std::string long_command =
        "/usr/bin/python3 -m torch.distributed.run --nproc_per_node=4 train.py --config "
        "configs/very/long/path/"
        "experiment-2026-12-07.yaml --resume checkpoints/step-120000 --wandb-project something";
    status["devices"][0]["other_processes"][0]["command"] = long_command;
    status["holds"][0]["command"] = long_command;
    EXPECT_LE(widest(ps_table(status, true)), widest(ps_table(kStatus, true)) + 24) << ps_table(status, true);
    const auto status_lines = status_text(status);
    const auto other = status_lines.find("  other: ");
    ASSERT_NE(other, std::string::npos) << status_lines;
    EXPECT_LE(status_lines.find('\n', other) - other, 80u) << status_lines;
    for (const auto& text : {ps_table(status, true), status_text(status)}) {
        EXPECT_NE(text.find("/usr/bin/python3 -m torch"), std::string::npos) << text;  // its start is kept
        EXPECT_NE(text.find("…"), std::string::npos) << text;                          // and the cut is shown
    }
}

}  // namespace
}  // namespace loch::cli
