"""Calls served models through the installed SDK alone; run by a venv's python, by path.

``python sdk_alone_calls.py PLAN.json OUT.json``. It imports nothing but the standard
library, numpy and ``triton_kit.client``: it runs in a venv where ``pip install triton-kit``
(no extras) is all there is (tests/integration/client/test_sdk_alone.py), so an SDK that
needed anything else fails here. Results go to OUT.json for the test to check against its
references, which need packages this venv must not have.

PLAN: ``{"urls": {PROTOCOL: URL}, "calls": [{"kind", "model", "inputs"}]}``, with kinds
``classify`` (encoded image files), ``classify_pixels`` (.npy RGB uint8 arrays), ``embed``
(texts) and ``translate`` (``{"texts", "beam_size"}`` requests).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import numpy as np

from triton_kit.client import AsyncTritonClient, Classification, TritonClient

# kind -> (SDK method, the models= key that routes it)
ROUTES = {
    "classify": ("classify", "classify"),
    "classify_pixels": ("classify", "classify_uint8"),
    "embed": ("embed", "embed"),
    "translate": ("translate", "translate"),
}


def classification(result: Classification) -> list[list[object]]:
    return [[p.class_id, p.label, p.score] for p in result.predictions]


def call(client: TritonClient, kind: str, inputs: list) -> list:
    """One kind's inputs through the SDK, each as a user would send it."""
    if kind == "classify":
        return [classification(client.classify(Path(path).read_bytes())) for path in inputs]
    if kind == "classify_pixels":
        return [classification(client.classify(np.load(path))) for path in inputs]
    if kind == "embed":
        return client.embed(inputs).tolist()
    return [client.translate(r["texts"], beam_size=r["beam_size"]) for r in inputs]


async def embed_async(url: str, model: str, texts: list[str]) -> list:
    client = AsyncTritonClient(url, timeout=120, models={"embed": model})
    try:
        return (await client.embed(texts)).tolist()
    finally:
        await client.close()


def run(plan: dict) -> dict:
    out: dict = {"sync": {}, "async": {}}
    for protocol, url in plan["urls"].items():
        out["sync"][protocol] = results = {}
        for entry in plan["calls"]:
            _, key = ROUTES[entry["kind"]]
            models = {key: entry["model"]}
            with TritonClient(url, timeout=120, models=models) as client:
                results[entry["model"]] = call(client, entry["kind"], entry["inputs"])
            if entry["kind"] == "embed":
                embedded = asyncio.run(embed_async(url, entry["model"], entry["inputs"]))
                out["async"].setdefault(protocol, {})[entry["model"]] = embedded
    return out


def main(argv: list[str]) -> int:
    plan_path, out_path = argv
    out = run(json.loads(Path(plan_path).read_text()))
    Path(out_path).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
