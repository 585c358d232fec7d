#!/usr/bin/env python3
# A TEST DOUBLE of an engine that takes a while to load and says so in its log when it is ready, as
# llama-server ("server is listening") and vLLM do. It listens at once and answers GET /health 503 until
# READY_S seconds after start, then 200; at that moment it writes one line to stderr (its log). It writes the
# milliseconds between its readiness and the first 200 it served to REPORT, so a test can see how long loch
# took to notice (the cold-start overhead of issue 9). POST /v1/chat/completions answers a fixed completion.
#   ready_later.py PORT READY_S REPORT
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, ready_s, report = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
ready_at = None
reported = False
lock = threading.Lock()


def become_ready():
    global ready_at
    time.sleep(ready_s)
    with lock:
        ready_at = time.monotonic()
    sys.stderr.write("ready_later: model loaded, server is listening\n")
    sys.stderr.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        global reported
        if self.path != "/health":
            return self.reply(404, b"{}")
        with lock:
            ready = ready_at is not None
            if ready and not reported:
                reported = True
                with open(report, "w") as f:
                    f.write("%.3f\n" % ((time.monotonic() - ready_at) * 1000))
        self.reply(200 if ready else 503, b"{}" if ready else b'{"error":{"message":"Loading model"}}')

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        body = {"id": "x", "object": "chat.completion", "model": "later",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        self.reply(200, json.dumps(body).encode())


threading.Thread(target=become_ready, daemon=True).start()
ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
