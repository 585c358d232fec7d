#!/usr/bin/env python3
# Prometheus' own parser of the text exposition format (pip `prometheus_client`, pinned by
# scripts/setup.sh) over loch's /metrics saved in the file argv[1] (else stdin). Prints {"family": {"name{labels}": value}} as JSON;
# a parse error exits non-zero.
import json, sys

from prometheus_client.parser import text_string_to_metric_families

out = {}
text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
for family in text_string_to_metric_families(text):
    samples = out.setdefault(family.name, {"type": family.type, "samples": {}})["samples"]
    for s in family.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        samples[f"{s.name}{{{labels}}}"] = s.value
print(json.dumps(out))
