#!/usr/bin/env python3
# A real client in the test: OpenAI's own Python client (pip `openai`, pinned by scripts/setup.sh) sending loch
# an audio file: a generated WAV (16 kHz mono, a 440 Hz tone) of SECONDS seconds.
#   openai_audio.py PORT MODEL transcribe|translate|transcribe-png SECONDS [response_format] [extra fields as JSON]
# (transcribe-png sends a PNG picture instead of audio, as a user who picked the wrong file does.)
# Prints {"text": …} (or {"raw": …} for text formats); an API error prints {"status", "body"} and exits 3.
import json, math, struct, sys

import openai

port, model, mode, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
fmt = sys.argv[5] if len(sys.argv) > 5 else "json"
extra = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)

rate = 16000
n = int(rate * seconds)
pcm = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate))) for i in range(n))
wav = (b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " +
       struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) + b"data" + struct.pack("<I", len(pcm)) + pcm)

try:
    api = client.audio.translations if mode == "translate" else client.audio.transcriptions
    kwargs = {"model": model, "file": ("tone.wav", wav, "audio/wav"), "response_format": fmt}
    if mode == "transcribe-png":
        kwargs["file"] = ("photo.png", b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png")
    if mode != "translate":
        kwargs["language"] = "en"
    if extra:
        kwargs["extra_body"] = extra
    r = api.create(**kwargs)
except openai.APIStatusError as e:
    try:
        body = e.response.json()
    except Exception:
        body = e.response.text
    print(json.dumps({"status": e.status_code, "body": body}))
    sys.exit(3)
if hasattr(r, "model_dump"):
    print(json.dumps(r.model_dump()))  # every field whisper-server sent (verbose_json: task, segments)
else:
    print(json.dumps({"raw": str(r)}))  # text formats come as a str
