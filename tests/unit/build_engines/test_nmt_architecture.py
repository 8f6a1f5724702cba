"""The NMT architectures behind one interface (families/nmt/architecture.py): both registered
ones provide every member of the protocol, with the protocol's parameters, and differ where
they are served."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from triton_kit.build_engines.families.nmt import architecture as interface
from triton_kit.build_engines.families.nmt.options import ARCHITECTURES, NmtOptions, architecture


def _members(protocol: type) -> dict[str, object]:
    names = set(getattr(protocol, "__annotations__", {}))
    names |= {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")}
    return {n: getattr(protocol, n, None) for n in sorted(names)}


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_each_architecture_provides_the_whole_interface(name: str) -> None:
    arch = architecture(name)
    assert arch.name == name
    for member, declared in _members(interface.Architecture).items():
        assert hasattr(arch, member), f"{name} lacks {member}"
        if callable(declared):
            wanted = list(inspect.signature(declared).parameters)[1:]  # without self
            assert list(inspect.signature(getattr(arch, member)).parameters) == wanted, member


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_each_training_run_provides_the_whole_recipe(name: str) -> None:
    run = architecture(name).training(7)
    assert run.steps == 7
    for member in _members(interface.TrainingRun):
        assert hasattr(run, member), f"{name}'s training lacks {member}"


def test_the_architectures_serve_apart_and_default_to_their_committed_models() -> None:
    transformer, rnn = architecture("transformer"), architecture("rnn")
    assert transformer.names.steps == ("nmt", "nmt_encoder", "nmt_decoder")
    assert rnn.names.steps == ("nmt_rnn", "nmt_rnn_encoder", "nmt_rnn_decoder")
    assert (transformer.names.generate, rnn.names.generate) == ("nmt_generate", "nmt_rnn_generate")
    assert NmtOptions().checkpoint_dir == transformer.default_checkpoint
    assert NmtOptions(architecture="rnn").checkpoint_dir == rnn.default_checkpoint
    assert NmtOptions(architecture="rnn", checkpoint=Path("x")).checkpoint_dir == Path("x")
    # the recurrent model is served with the Transformer checkpoint's tokenizer
    assert rnn.tokenizer_checkpoint(Path("any")) == transformer.default_checkpoint
    assert transformer.tokenizer_checkpoint(Path("any")) == Path("any")


def test_only_the_transformer_builds_the_search_in_half_precision() -> None:
    assert "fp16" in architecture("transformer").torch_precisions
    assert architecture("rnn").torch_precisions == ("fp32", "int8-dynamic")


def test_an_unknown_architecture_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="transformer, rnn"):
        architecture("lstm")


def test_parity_checks_the_worse_graph() -> None:
    interface.Parity(1e-6, 5e-4).check()
    with pytest.raises(AssertionError, match=r"2\.00e-03"):
        interface.Parity(1e-6, 2e-3).check()
