#!/usr/bin/env python3
# A TEST DOUBLE of a Python inference server people start by hand (a TTS or captioning server) for the command
# kind's tests: OpenAI-compatible enough (GET /health, POST /v1/chat/completions and /v1/audio/speech), and its
# memory grows after start the way such servers' does (lazy model init, caches): each request allocates and
# touches GROW_MIB more, up to MAX_MIB, and keeps it.
#   growing_server.py PORT GROW_MIB MAX_MIB
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

port, grow, cap = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
held = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply(200 if self.path == "/health" else 404, b"{}")

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if len(held) * grow < cap:
            held.append(b"\x01" * (grow << 20))  # touched: resident
        if self.path == "/v1/audio/speech":
            self.reply(200, b"RIFF....WAVE", "audio/wav")
            return
        body = {"id": "x", "object": "chat.completion", "model": "grower",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": f"holding {len(held) * grow} MiB"}}]}
        self.reply(200, json.dumps(body).encode())


HTTPServer(("127.0.0.1", port), Handler).serve_forever()
