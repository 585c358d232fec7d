#!/usr/bin/env python3
# Real clients in the test: OpenAI's Python client on the Responses API and Anthropic's Python client on the
# Messages API (pip `openai`, `anthropic`, pinned by scripts/setup.sh), as Codex / the Agents SDK and Claude Code
# send them, through loch.
#   api_families.py PORT MODEL responses|responses-stream|responses-helper|responses-turns|responses-hangup|messages|
#                   messages-stream|messages-error|count-tokens
# Prints one JSON line: {"text": …} (and what the API said about the usage, the message's id); an API error
# prints {"status", "type", "message", "loch_type"} and exits 3.
import json, sys

import anthropic
import openai

port, model, mode = sys.argv[1], sys.argv[2], sys.argv[3]
base = f"http://127.0.0.1:{port}"
try:
    if mode.startswith("responses"):
        client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=300)
        if mode == "responses":
            r = client.responses.create(model=model, input="Say hello.", max_output_tokens=8, temperature=0)
            print(json.dumps({"text": r.output_text, "status": r.status}))
        elif mode == "responses-helper":
            # The SDK's accumulating helper: it indexes its snapshot by output_index and content_index.
            with client.responses.stream(model=model, input="Say hello.", max_output_tokens=8,
                                         temperature=0) as s:
                deltas = "".join(e.delta for e in s if e.type == "response.output_text.delta")
                final = s.get_final_response()
            print(json.dumps({"text": final.output_text, "deltas": deltas, "id": final.id,
                              "model": final.model}))
        elif mode == "responses-hangup":
            # As Codex does: read the stream until response.completed, then close the connection at once.
            import httpx
            rid = None
            with httpx.stream("POST", base + "/v1/responses", timeout=300,
                              json={"model": model, "input": "Say hello.", "max_output_tokens": 8, "stream": True,
                                    "temperature": 0}) as r:
                for line in r.iter_lines():
                    if line.startswith("data:") and '"response.completed"' in line:
                        rid = json.loads(line[5:])["response"]["id"]
                        break
            kept = client.responses.retrieve(rid)
            print(json.dumps({"text": kept.output_text, "id": rid, "status": kept.status}))
        elif mode == "responses-turns":
            # Multi-turn as the Agents SDK does it: the second turn names the first by its id only.
            first = client.responses.create(model=model, input="My name is Ada.", max_output_tokens=8,
                                            temperature=0)
            kept = client.responses.retrieve(first.id)
            second = client.responses.create(model=model, input="What is my name?", max_output_tokens=8,
                                             temperature=0, previous_response_id=first.id)
            items = client.responses.input_items.list(second.id, order="asc")
            gone = client.responses.delete(second.id)
            try:
                client.responses.retrieve(second.id)
                after_delete = "still there"
            except openai.NotFoundError:
                after_delete = "not found"
            try:
                client.responses.create(model=model, input="x", max_output_tokens=4, previous_response_id=second.id)
                chained = "accepted"
            except openai.NotFoundError as e:
                chained = "not found"
            print(json.dumps({"text": second.output_text, "first": first.id, "retrieved": kept.id,
                              "retrieved_text": kept.output_text, "previous": second.previous_response_id,
                              "input_items": [i.type for i in items.data],
                              "input_roles": [getattr(i, "role", None) for i in items.data],
                              "deleted": str(gone), "after_delete": after_delete, "chained": chained,
                              "usage_first": first.usage.input_tokens, "usage_second": second.usage.input_tokens}))
        else:
            # The raw event stream, as Codex reads it (the SDK's accumulating helper expects fields that the
            # pinned llama-server leaves null in response.created).
            text, done = "", False
            for event in client.responses.create(model=model, input="Say hello.", max_output_tokens=8, temperature=0,
                                                stream=True):
                if event.type == "response.output_text.delta":
                    text += event.delta
                done = done or event.type == "response.completed"
            print(json.dumps({"text": text, "completed": done}))
    else:
        client = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0, timeout=300)
        name = "no-such-model" if mode == "messages-error" else model
        if mode == "count-tokens":
            # Claude Code sizes its context with this before it sends (the engine's tokenizer, through loch).
            c = client.messages.count_tokens(model=name, system="Be brief.",
                                             messages=[{"role": "user", "content": "Say hello."}])
            print(json.dumps({"text": "", "input_tokens": c.input_tokens}))
        elif mode == "messages-stream":
            with client.messages.stream(model=name, max_tokens=8, extra_body={"temperature": 0},
                                        messages=[{"role": "user", "content": "Say hello."}]) as s:
                text = "".join(s.text_stream)
                final = s.get_final_message()
            print(json.dumps({"text": text, "stop_reason": final.stop_reason, "id": final.id}))
        else:
            m = client.messages.create(model=name, max_tokens=8, system="Be brief.", extra_body={"temperature": 0},
                                       messages=[{"role": "user", "content": "Say hello."}])
            print(json.dumps({"text": "".join(b.text for b in m.content if b.type == "text"),
                              "stop_reason": m.stop_reason, "usage": m.usage.model_dump(), "id": m.id}))
except (openai.APIStatusError, anthropic.APIStatusError) as e:
    body = e.body if isinstance(e.body, dict) else {}
    err = body.get("error", body) if isinstance(body, dict) else {}
    print(json.dumps({"status": e.status_code, "type": err.get("type"), "message": err.get("message"),
                      "top_type": body.get("type"), "loch_type": err.get("loch_type")}))
    sys.exit(3)
