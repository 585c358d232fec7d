#!/usr/bin/env python3
# A real client in the test: OpenAI's own Python client (pip `openai`, pinned by scripts/setup.sh) asking
# loch for an image. Prints {"width", "height", "bytes"} of the PNG it got; any error exits non-zero with
# the client's exception (status and body) on stderr.
import base64, json, struct, sys

import openai

# `edit WxH` as the fourth argument: an edit (multipart upload) of a generated WxH PNG, no size named.
import zlib

port, model, size = sys.argv[1], sys.argv[2], sys.argv[3]
edit = len(sys.argv) > 4 and sys.argv[4] == "edit"
client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)


def png_of(w, h):
    raw = b"".join(b"\x00" + bytes([128, 64, 32]) * w for _ in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


try:
    if edit:
        w, h = (int(x) for x in size.split("x"))
        r = client.images.edit(model=model, image=("in.png", png_of(w, h), "image/png"),
                               prompt="the same lighthouse at night", n=1, response_format="b64_json")
    else:
        r = client.images.generate(model=model, prompt="a lighthouse at dusk", size=size, n=1,
                                   response_format="b64_json")
except openai.APIStatusError as e:
    print(json.dumps({"status": e.status_code, "body": e.response.json()}))
    sys.exit(3)
png = base64.b64decode(r.data[0].b64_json)
assert png[:8] == b"\x89PNG\r\n\x1a\n", png[:16]
width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
print(json.dumps({"width": width, "height": height, "bytes": len(png)}))
