"""Requests to the translation models that the client SDK does not send (several rows in
one request, each with its own settings)."""

from __future__ import annotations

import numpy as np
import tritonclient.grpc as grpcclient


def rows_request(
    url: str, texts: list[str], beams: list[int], limits: list[int], model: str = "nmt"
) -> list[str]:
    """One request of several rows, each with its own BEAM_SIZE and MAX_LENGTH."""
    client = grpcclient.InferenceServerClient(url.removeprefix("grpc://"))
    try:
        tensors = {
            "TEXT": np.array([[t.encode()] for t in texts], dtype=np.object_),
            "BEAM_SIZE": np.array([[b] for b in beams], dtype=np.int32),
            "MAX_LENGTH": np.array([[m] for m in limits], dtype=np.int32),
        }
        inputs = []
        for name, value in tensors.items():
            kind = "BYTES" if name == "TEXT" else "INT32"
            tensor = grpcclient.InferInput(name, list(value.shape), kind)
            tensor.set_data_from_numpy(value)
            inputs.append(tensor)
        result = client.infer(model, inputs, client_timeout=60)
        return [row[0].decode() for row in result.as_numpy("TRANSLATION")]
    finally:
        client.close()
