"""benchmarks/results/tune_gpu.md from a tune.sh call's files: chosen beside as built."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from triton_kit.benchmarks.gpu import tune_report


def _best(throughput: float, p99: float, concurrency: int) -> dict:
    return {"throughput": throughput, "p99_ms": p99, "concurrency": concurrency}


def _summary(model: str, chosen: str | None, configs: list[dict]) -> dict:
    return {
        "run": {
            "date": "2026-11-27 10:00 UTC",
            "machine": "h100, 16 cores, x86_64",
            "command": f"python -m triton_kit.loadtest tune {model} --slo-p99-ms 150",
            "commit": "abc1234",
            "limits": "p99 <= 150 ms",
            "measurement": "perf_analyzer windows of 1000 ms, stable within 50%",
        },
        "models": {
            model: {
                "chosen": chosen,
                "failure": None if chosen else f"{model}: no config serves within p99 <= 150 ms",
                "fields": {c["config"]: f"fields of {c['config']}" for c in configs},
                "configs": configs,
            }
        },
    }


def _files(tmp_path: Path, runs: dict[str, dict]) -> Path:
    files = tmp_path / "files"
    files.mkdir()
    with tarfile.open(files / "tune.tar.gz", "w:gz") as tar:
        for model, summary in runs.items():
            for name, data in (
                ("summary.json", json.dumps(summary).encode()),
                (
                    "summary.md",
                    f"# Tuning report\n\n- x: y\n\n## {model}\n\n**Chosen** ok\n".encode(),
                ),
                (f"{model}.png", b"png"),
            ):
                info = tarfile.TarInfo(f"./runs/{model}/{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    (files / "nvidia-smi.txt").write_text(
        "| NVIDIA-SMI 580.95.05    Driver Version: 580.95.05    CUDA Version: 13.0 |\n"
        "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:00:00.0 Off |\n"
    )
    return files


def test_the_page_sets_the_chosen_config_beside_the_one_as_built(tmp_path: Path) -> None:
    default = "resnet50_model_config_default"
    resnet = _summary(
        "resnet50_model",
        "resnet50_model_config_3",
        [
            {"config": "resnet50_model_config_3", "as_built": False, "best": _best(12000, 90, 256)},
            {"config": default, "as_built": True, "best": _best(10000, 110, 256)},
        ],
    )
    files = _files(tmp_path, {"resnet50_model": resnet})
    out = tmp_path / "results" / "tune_gpu.md"
    out.parent.mkdir()
    text = tune_report.render(files, out, "bash scripts/gpu/bench.sh ...")
    assert "| GPU | NVIDIA H100 80GB HBM3, driver 580.95.05 |" in text
    assert "| commit | `abc1234` |" in text
    row = next(line for line in text.splitlines() if line.startswith("| `resnet50_model` | p99"))
    assert (
        "`resnet50_model_config_3`: fields of resnet50_model_config_3 | 12,000 | 90.0 | 256" in row
    )
    assert "fields of resnet50_model_config_default | 10,000 | 110.0 | 256 | 1.20 |" in row
    # A model the run did not reach is named, not left out silently.
    assert "Not tuned in this run (cut short or failed; see run.log): bert_model." in text
    assert "### resnet50_model" in text and "**Chosen** ok" in text
    assert (out.parent / "tune_gpu" / "resnet50_model.png").read_bytes() == b"png"


def test_a_model_with_no_config_within_the_limit_says_why(tmp_path: Path) -> None:
    bert = _summary(
        "bert_model",
        None,
        [{"config": "bert_model_config_default", "as_built": True, "best": None}],
    )
    files = _files(tmp_path, {"bert_model": bert})
    text = tune_report.render(files, tmp_path / "tune_gpu.md", "cmd")
    row = next(line for line in text.splitlines() if line.startswith("| `bert_model` |"))
    assert "none: bert_model: no config serves within p99 <= 150 ms" in row
    assert "over the SLO" in row
