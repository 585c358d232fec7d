#!/usr/bin/env python3
# A TEST DOUBLE of stable-diffusion.cpp's sd-server on a Radeon (an AMD APU: Strix Halo), for the replays of
# docs/strix-halo.md. No Radeon exists where CI runs, so nothing real can load a 56 GB model onto one here;
# this stands in for the engine and nothing else — every decision under test is loch's, made before or
# around it. It takes sd-server's command line, says what the real one says about its weights (`Version:`,
# `total params memory size = … (VRAM …, RAM …)` with the component files' sizes on the device), writes the
# device variables it was started with to its log, opens its port (the real one does once loaded) and
# answers an image request with a 1x1 PNG. It never allocates what it reports.
import base64, json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()

args = sys.argv[1:]
opt = lambda name: args[args.index(name) + 1] if name in args else None
port = int(opt("--listen-port"))
files = [opt(f) for f in ("--diffusion-model", "-m", "--llm", "--clip_l", "--t5xxl", "--vae", "--taesd") if opt(f)]
mib = sum(os.path.getsize(f) for f in files) / (1 << 20)
on_cpu = "--offload-to-cpu" in args
print("[INFO ] sd_server_radeon.py - TEST DOUBLE of sd-server on a Radeon", flush=True)
for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GGML_CUDA_ENABLE_UNIFIED_MEMORY"):
    print(f"[DEBUG] environment {var}={os.environ.get(var, '(unset)')}", flush=True)
print("[INFO ] stable-diffusion.cpp:305  - Version: Flux.2 ", flush=True)
print(f"[INFO ] stable-diffusion.cpp:858  - total params memory size = {mib:.2f}MB "
      f"(VRAM {0 if on_cpu else mib:.2f}MB, RAM {mib if on_cpu else 0:.2f}MB)", flush=True)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.reply(404, {"error": "not found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        print(f"[INFO ] generate_image {body.get('size', '512x512')} (double: no pixels computed)", flush=True)
        if self.path == "/sdapi/v1/txt2img":
            self.reply(200, {"images": [PNG], "parameters": body, "info": "{}"})
        else:
            self.reply(200, {"created": int(time.time()), "data": [{"b64_json": PNG}]})


HTTPServer(("127.0.0.1", port), Handler).serve_forever()
