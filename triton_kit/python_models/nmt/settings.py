"""NMT decode settings ⇄ config.pbtxt parameters, and the per-request limits.

The build reads token ids and scoring rules from the checkpoint's generation
config and writes them as parameters; the BLS model reads them back here, so the
server needs neither transformers nor the checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

from triton_kit.python_models.common.contracts import DEFAULT_MAX_TEXT_BYTES
from triton_kit.python_models.common.parameters import ModelParameters
from triton_kit.python_models.nmt.decode import DecodeSettings

# rows x beam x MAX_LENGTH per request: 32 x 4 x 128 fits; 32 x 16 x 64 (10 s, +500 MB) does not.
DEFAULT_MAX_BEAM_TOKENS = 16384


@dataclass(frozen=True)
class Limits:
    """What a request may ask for; ``max_length`` counts the decoder start token (HF)."""

    default_beam_size: int
    max_beam_size: int
    default_max_length: int
    max_target_length: int
    max_source_length: int
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    max_beam_tokens: int = DEFAULT_MAX_BEAM_TOKENS


def to_parameters(settings: DecodeSettings, limits: Limits) -> dict[str, object]:
    layers, heads, head_dim = settings.cache_shape
    return {
        "decoder_start_token_id": settings.decoder_start_token_id,
        "eos_token_id": settings.eos_token_id,
        "pad_token_id": settings.pad_token_id,
        "suppressed_token_ids": ",".join(str(i) for i in settings.suppressed_token_ids),
        "forced_eos": settings.forced_eos,
        "length_penalty": settings.length_penalty,
        "early_stopping": str(settings.early_stopping).lower(),
        "decoder_layers": layers,
        "decoder_heads": heads,
        "head_dim": head_dim,
        "recurrent_state": settings.recurrent_state,
        "default_beam_size": limits.default_beam_size,
        "max_beam_size": limits.max_beam_size,
        "default_max_length": limits.default_max_length,
        "max_target_length": limits.max_target_length,
        "max_source_length": limits.max_source_length,
    }


def _early_stopping(text: str) -> bool | str:
    mapping = {"true": True, "false": False, "never": "never"}
    if text not in mapping:
        raise ValueError(f"early_stopping must be true, false or never, got {text!r}")
    return mapping[text]


def from_parameters(params: ModelParameters) -> tuple[DecodeSettings, Limits]:
    suppressed = params.str("suppressed_token_ids", "")
    settings = DecodeSettings(
        decoder_start_token_id=params.int("decoder_start_token_id"),
        eos_token_id=params.int("eos_token_id"),
        pad_token_id=params.int("pad_token_id"),
        cache_shape=(
            params.int("decoder_layers"),
            params.int("decoder_heads"),
            params.int("head_dim"),
        ),
        suppressed_token_ids=tuple(int(i) for i in suppressed.split(",") if i.strip()),
        forced_eos=params.bool("forced_eos"),
        length_penalty=params.float("length_penalty"),
        early_stopping=_early_stopping(params.str("early_stopping")),
        recurrent_state=params.bool("recurrent_state", False),
    )
    limits = Limits(
        default_beam_size=params.int("default_beam_size"),
        max_beam_size=params.int("max_beam_size"),
        default_max_length=params.int("default_max_length"),
        max_target_length=params.int("max_target_length"),
        max_source_length=params.int("max_source_length"),
        max_text_bytes=params.int("max_text_bytes", DEFAULT_MAX_TEXT_BYTES),
        max_beam_tokens=params.int("max_beam_tokens", DEFAULT_MAX_BEAM_TOKENS),
    )
    return settings, limits
