#!/usr/bin/env python3
# A real client in the test: Ollama's own Python client (pip `ollama`, pinned by scripts/setup.sh) against
# loch's Ollama API. Lists, chats (whole and streamed), generates and embeds; prints one JSON object with
# what it saw, and exits non-zero at the first thing that is not as Ollama's clients expect. Greedy
# (temperature 0) where it asserts text: the demo model ends a sampled answer after a few tokens, maybe none.
import json, sys

import ollama

port, chat_model, embed_model = sys.argv[1], sys.argv[2], sys.argv[3]
client = ollama.Client(host=f"http://127.0.0.1:{port}")
seen = {}

tags = client.list()
seen["tags"] = sorted(m.model for m in tags.models)
assert chat_model in seen["tags"], seen

r = client.chat(model=chat_model, messages=[{"role": "user", "content": "Hello"}], stream=False,
                options={"num_predict": 6, "temperature": 0, "seed": 1}, keep_alive="10m")
assert r.done and r.message.role == "assistant" and r.message.content, r
assert r.eval_count and r.eval_count > 0, r
seen["chat"] = {"content": r.message.content, "eval_count": r.eval_count, "done_reason": r.done_reason}

parts = list(client.chat(model=chat_model, messages=[{"role": "user", "content": "Hello"}], stream=True,
                         options={"num_predict": 6, "temperature": 0}))
assert len(parts) >= 2 and parts[-1].done and not parts[0].done, parts
seen["chat_stream"] = {"chunks": len(parts), "text": "".join(p.message.content or "" for p in parts),
                       "eval_count": parts[-1].eval_count}
assert seen["chat_stream"]["text"], seen

g = client.generate(model=chat_model, prompt="Once", stream=False, options={"num_predict": 4, "temperature": 0})
assert g.done and g.response, g
seen["generate"] = g.response

e = client.embed(model=embed_model, input=["first text", "second text"])
assert len(e.embeddings) == 2 and len(e.embeddings[0]) > 0, e
seen["embed"] = {"vectors": len(e.embeddings), "dims": len(e.embeddings[0])}

ps = client.ps()
seen["ps"] = sorted(m.model for m in ps.models)
assert chat_model in seen["ps"], seen

try:
    client.chat(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    raise AssertionError("an unknown model was accepted")
except ollama.ResponseError as err:
    seen["unknown_model"] = {"status": err.status_code, "error": err.error}
    assert err.status_code == 404 and "no-such-model" in err.error, err

try:
    client.chat(model=chat_model, messages=[{"role": "user", "content": "x"}], options={"num_ctx": 10000000})
    raise AssertionError("num_ctx beyond the slot context was accepted")
except ollama.ResponseError as err:
    seen["num_ctx"] = {"status": err.status_code, "error": err.error}
    assert err.status_code == 400 and "slot context" in err.error, err

print(json.dumps(seen))
