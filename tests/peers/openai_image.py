#!/usr/bin/env python3
# A real client in the test: OpenAI's own Python client (pip `openai`, pinned by scripts/setup.sh) asking
# loch for an image. Prints {"width", "height", "bytes"} of the PNG it got; any error exits non-zero with
# the client's exception (status and body) on stderr.
import base64, json, struct, sys

import openai

port, model, size = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)
try:
    r = client.images.generate(model=model, prompt="a lighthouse at dusk", size=size, n=1,
                               response_format="b64_json")
except openai.APIStatusError as e:
    print(json.dumps({"status": e.status_code, "body": e.response.json()}))
    sys.exit(3)
png = base64.b64decode(r.data[0].b64_json)
assert png[:8] == b"\x89PNG\r\n\x1a\n", png[:16]
width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
print(json.dumps({"width": width, "height": height, "bytes": len(png)}))
