#!/usr/bin/env python3
# A real client in the test: OpenAI's own Python client (pip `openai`, pinned by scripts/setup.sh) using
# loch's Batch API files the way a batch script does: upload (purpose=batch), retrieve, list, download the
# content, delete; a bad file must come back as a 400 the client raises, with the line numbers in its message.
# Usage: openai_files.py PORT GOOD_JSONL BAD_JSONL. Prints one JSON line of what it saw; exits non-zero on
# anything unexpected.
import json, sys

import openai

port, good, bad = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)

with open(good, "rb") as f:
    uploaded = client.files.create(file=f, purpose="batch")
assert uploaded.purpose == "batch" and uploaded.filename.endswith(".jsonl"), uploaded
again = client.files.retrieve(uploaded.id)
assert again.bytes == uploaded.bytes, (again, uploaded)
listed = [f.id for f in client.files.list()]
assert uploaded.id in listed, listed
content = client.files.content(uploaded.id).read()
with open(good, "rb") as f:
    assert content == f.read(), "the downloaded content differs from the upload"

try:
    with open(bad, "rb") as f:
        client.files.create(file=f, purpose="batch")
    sys.exit("a bad file was accepted")
except openai.BadRequestError as e:
    refusal = e.response.json()["error"]

deleted = client.files.delete(uploaded.id)
assert deleted.deleted, deleted
try:
    client.files.retrieve(uploaded.id)
    sys.exit("a deleted file is still there")
except openai.NotFoundError:
    pass
print(json.dumps({"id": uploaded.id, "bytes": uploaded.bytes, "refusal": refusal}))
