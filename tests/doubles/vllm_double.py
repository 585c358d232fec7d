#!/usr/bin/env python3
# A TEST DOUBLE of vLLM's OpenAI server (`vllm serve`), for the vllm engine kind's integration test: vLLM
# itself needs a GPU and gigabytes of Python packages, neither of which CI has. It answers like vLLM where
# loch depends on it: GET /health, and POST /v1/chat/completions only with `Authorization: Bearer
# $VLLM_API_KEY`. It records how it was started (argv, the device variables) in vllm-double.json next to
# itself, so that the test can check what loch passed.
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
name = args[args.index("--served-model-name") + 1]
key = os.environ.get("VLLM_API_KEY", "")
record = {"argv": args, "env": {k: os.environ.get(k) for k in
          ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")},
          "has_api_key": bool(key)}
with open(os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "vllm-double.json"), "w") as f:
    json.dump(record, f)
# vLLM's start-up lines with memory (gpu_model_runner.py / gpu_worker.py), as a GPU run prints them: what it
# took for its weights, the KV cache it was given (with --kv-cache-memory-bytes: that much) and CUDA graphs.
if "--gpu-memory-utilization" in args:
    kv = int(args[args.index("--kv-cache-memory-bytes") + 1]) if "--kv-cache-memory-bytes" in args else 4 << 30
    print("INFO [gpu_model_runner.py:2040] Model loading took 10.00 GiB memory and 20.3 seconds", flush=True)
    print(f"INFO [gpu_worker.py:298] Available KV cache memory: {kv / (1 << 30):.2f} GiB", flush=True)
    print("INFO [gpu_model_runner.py:2708] Graph capturing finished in 7 secs, took 1.25 GiB", flush=True)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self.reply(200, {})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        req = json.loads(self.rfile.read(length) or b"{}")
        if self.headers.get("Authorization") != "Bearer " + key:
            self.reply(401, {"error": {"message": "Unauthorized"}})
            return
        # Sleep mode's development endpoints (VLLM_SERVER_DEV_MODE=1 and --enable-sleep-mode), each call
        # appended to vllm-double-<name>.calls for the test.
        route = self.path.split("?")[0]
        if route in ("/sleep", "/wake_up", "/collective_rpc"):
            if os.environ.get("VLLM_SERVER_DEV_MODE") != "1" or "--enable-sleep-mode" not in args:
                self.reply(404, {"detail": "Not Found"})
                return
            with open(os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), f"vllm-double-{name}.calls"),
                      "a") as f:
                f.write(self.path + (" " + json.dumps(req) if req else "") + "\n")
            if route == "/sleep":
                print("INFO [gpu_worker.py:101] Sleep mode freed 70.00 GiB memory, 1.50 GiB memory is still in use.",
                      flush=True)
            self.reply(200, {})
            return
        if self.path != "/v1/chat/completions":
            self.reply(404, {"error": "not found"})
            return
        self.reply(200, {"id": "cmpl-double", "object": "chat.completion", "model": req.get("model", name),
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": "double"}}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
