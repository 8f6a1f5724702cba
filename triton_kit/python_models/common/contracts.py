"""Names and defaults that the build, the served models and the client must agree on.

Defined once here, on the server side. ``triton_kit/client/`` must stay installable on its own, so
it keeps a copy of what it needs; ``tests/unit/client/test_contracts.py`` checks that the copy
matches. Which SDK method calls which model is the SDK's own table
(``triton_kit.client.options.DEFAULT_MODELS``): nothing served needs it.
"""

from __future__ import annotations

# resnet50 ensemble: one encoded image in, top-k classes out.
IMAGE = "IMAGE"
CLASS_IDS = "CLASS_IDS"
SCORES = "SCORES"
LABELS = "LABELS"
CLASSIFY_OUTPUTS = (CLASS_IDS, SCORES, LABELS)

# The most decoded pixels the resnet50 pre-processor's torch path (nvJPEG on a GPU instance)
# holds at once: it decodes and resizes an execute call's images in chunks of at most this many
# pixels (summed from the headers, before decoding), so device memory is bounded by this, not by
# the max batch (256 images at the 40 MP per-image limit would be ~30 GB decoded). Why 80 M:
# two images at the per-image limit (ImageLimits.max_pixels, 40 M; one image over the budget
# still goes alone), 240 MB of RGB uint8, while 256 typical photos (~0.25 MP) stay one call.
DECODE_PIXEL_BUDGET = 80_000_000


# The longest text (UTF-8 bytes) a request may carry, for bert and nmt alike.
DEFAULT_MAX_TEXT_BYTES = 65536


def family_of(model_name: str) -> str:
    """The family a served model belongs to: ``bert_model`` -> ``bert``, ``nmt`` -> ``nmt``."""
    return model_name.split("_")[0]


# nmt_decoder: one Transformer decoder step over a KV cache
# (triton_kit/build_engines/families/nmt/export.py writes the graph,
# triton_kit/build_engines/families/nmt/repository.py its config; the search feeds it).
# ``beam_index`` [rows] names the ``past_kv`` row each row continues: the beam reorder runs inside
# the step (one gather, no copy of the whole cache between steps). The RNN decoder has no such
# input.
BEAM_INDEX = "beam_index"
NMT_DECODER_INPUTS = ("input_ids", "encoder_attention_mask", "cross_kv", "past_kv", BEAM_INDEX)
NMT_DECODER_OUTPUTS = ("logits", "present_kv")


def decoder_feed(input_ids, attention_mask, cross_kv, past_kv, beam_index=None) -> dict:
    """The step's inputs by name, as every caller of the decoder sends them (sessions, BLS,
    the calibration recorder); ``beam_index`` (int64) only for a decoder that reorders."""
    import numpy as np

    arrays = (input_ids, attention_mask, cross_kv, past_kv)
    feed = dict(zip(NMT_DECODER_INPUTS[:4], arrays, strict=True))
    if beam_index is not None:
        feed[BEAM_INDEX] = np.asarray(beam_index, dtype=np.int64)
    return feed
