"""The GPU NMT report shows how far each row's translations agree with the CPU-served fp32
row: the large model has no references, and a broken fp16 step (every sentence empty) was
once reported as the fastest row."""

from __future__ import annotations

from triton_kit.benchmarks.gpu.nmt import add_agreement, cpu_row_key, markdown


def _cell(level: int, outputs: list[str]) -> dict:
    return {
        "concurrency": level,
        "sentences_per_s": 10.0,
        "p50_ms": 1.0,
        "p95_ms": 2.0,
        "p99_ms": 3.0,
        "exact": None,
        "tokens_per_sentence": 4.0,
        "phases": {},
        "sample": outputs[:2],
        "outputs": outputs,
    }


def test_each_cell_agrees_with_the_cpu_row_over_the_sentences_both_ran() -> None:
    cpu = ["a b", "c d", "e f"]
    results = {
        "large torchscript fp16 cuda, in-process": [_cell(8, ["a b", "c d", "e f", "g h"])],
        "large torchscript fp16 cuda, served": [_cell(8, ["", "", "", ""])],
        cpu_row_key("large"): [_cell(8, cpu)],
        "large torchscript generate fp32 cpu (profiling executor), served": [_cell(8, ["a b"])],
    }
    add_agreement(results)
    agreement = {key: cells[0]["agreement"] for key, cells in results.items()}
    assert agreement == {
        "large torchscript fp16 cuda, in-process": 1.0,
        "large torchscript fp16 cuda, served": 0.0,
        cpu_row_key("large"): 1.0,
        "large torchscript generate fp32 cpu (profiling executor), served": 1.0,
    }
    assert all("outputs" not in cells[0] for cells in results.values())
    results["large torchscript generate fp16 cuda (profiling executor), served"] = [_cell(8, [])]
    report = markdown(results, {"command": "python -m triton_kit.benchmarks.gpu.nmt"})
    profiling = "large torchscript generate fp16 cuda (profiling executor), served"
    assert f"| {profiling} | {cpu_row_key('large')} | 1.0x |" in report
    assert (
        "| large torchscript fp16 cuda, served | 8 | 10.0 | 1.0 | 2.0 | 3.0 |  | 0.000 | 4.0 |"
        in report
    )


def test_without_a_cpu_row_there_is_no_agreement() -> None:
    """A torch row on the CPU is not the reference row (its key also says ``cpu (``)."""
    key = "tiny torchscript generate fp32 cpu (profiling executor), served"
    results = {"tiny torchscript fp16 cuda, served": [_cell(1, ["x"])], key: [_cell(1, ["x"])]}
    add_agreement(results)
    assert all("agreement" not in cells[0] for cells in results.values())
