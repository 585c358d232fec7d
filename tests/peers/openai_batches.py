#!/usr/bin/env python3
# A real client in the test: OpenAI's own Python client (pip `openai`, pinned by scripts/setup.sh) running a
# batch through loch's Batch API the way a batch script does.
#   openai_batches.py PORT run JSONL     upload, create, poll to the end, list, download the output and error
#                                        files; prints what they held
#   openai_batches.py PORT cancel JSONL  upload, create, cancel once an item is done, poll to `cancelled`; a
#                                        second cancel (409) and a batch of an output file (400) must be refused
# Prints one JSON line of what it saw; exits non-zero on anything unexpected.
import json, sys, time

import openai

port, mode, path = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)
TERMINAL = {"completed", "failed", "expired", "cancelled"}


def poll(batch_id, until, limit_s=900):
    deadline = time.time() + limit_s
    seen = []
    while True:
        b = client.batches.retrieve(batch_id)
        if not seen or seen[-1] != b.status:
            seen.append(b.status)
        if until(b) or time.time() > deadline:
            return b, seen
        time.sleep(0.2)


def lines(file_id):
    if not file_id:
        return []
    return [json.loads(l) for l in client.files.content(file_id).read().decode().splitlines() if l.strip()]


with open(path, "rb") as f:
    uploaded = client.files.create(file=f, purpose="batch")
batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                              completion_window="24h", metadata={"job": "itest"})
assert batch.status in ("validating", "in_progress"), batch
assert batch.metadata == {"job": "itest"}, batch

if mode == "run":
    done, statuses = poll(batch.id, lambda b: b.status in TERMINAL)
    assert done.status == "completed", (done, statuses)
    listed = [b.id for b in client.batches.list(limit=100)]
    assert batch.id in listed, listed
    out, err = lines(done.output_file_id), lines(done.error_file_id)
    for o in out:
        assert o["error"] is None and o["response"]["status_code"] == 200, o
        assert o["id"].startswith("batch_req_") and o["response"]["request_id"], o
    print(json.dumps({"status": done.status, "statuses": statuses,
                      "counts": done.request_counts.model_dump(),
                      "output": [o["custom_id"] for o in out],
                      "objects": sorted({o["response"]["body"].get("object", "?") for o in out}),
                      "errors": [{"custom_id": e["custom_id"], "code": e["error"]["code"],
                                  "status_code": (e["response"] or {}).get("status_code")} for e in err],
                      "loch": (done.model_extra or {}).get("loch")}))
elif mode == "cancel":
    poll(batch.id, lambda b: b.request_counts.completed >= 1 or b.status in TERMINAL)
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status in ("cancelling", "cancelled"), cancelling
    done, statuses = poll(batch.id, lambda b: b.status in TERMINAL)
    assert done.status == "cancelled", (done, statuses)
    try:
        client.batches.cancel(batch.id)
        sys.exit("a cancelled batch was cancelled again")
    except openai.ConflictError as e:
        conflict = e.response.json()["error"]["type"]
    try:
        client.batches.create(input_file_id=done.error_file_id, endpoint="/v1/chat/completions",
                              completion_window="24h")
        sys.exit("a batch of an output file was accepted")
    except openai.BadRequestError as e:
        wrong_file = e.response.json()["error"]["message"]
    out, err = lines(done.output_file_id), lines(done.error_file_id)
    print(json.dumps({"status": done.status, "counts": done.request_counts.model_dump(),
                      "output": [o["custom_id"] for o in out],
                      "unfinished": [e["custom_id"] for e in err if e["error"]["code"] == "batch_cancelled"],
                      "conflict": conflict, "wrong_file": wrong_file}))
else:
    sys.exit("mode is run or cancel")
