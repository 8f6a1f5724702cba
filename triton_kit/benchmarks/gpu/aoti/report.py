"""One AOTInductor GPU run (``python -m triton_kit.benchmarks.gpu.aoti``) as a markdown report.

    python -m triton_kit.benchmarks.gpu.aoti.report aoti.json --out REPORT.md \\
        --command "..." --commit abc1234 --date "2026-11-27 09:50 UTC" [--log run.log]

The run writes ``aoti.json`` (``aoti-<family>.json`` for BERT) after each step; a run cut short
inside its ``served`` step leaves those rows only in its log, one ``<row> {dict}`` line each,
so ``--log`` fills them in. Every served ratio is taken against the in-process best of the
same run: the package at its largest batch, host copies included.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

ROW = re.compile(r"^(?P<key>[a-z0-9_]+) (?P<value>\{.*\})$")
LOAD = re.compile(
    r"^(?P<model>.+?)_c(?P<concurrency>\d+)(?:_(?P<shm>system|cuda)_shm)?(?P<client>_async|_capi|_http|_stream)?"
    r"(?:_rep(?P<rep>\d+))?$"
)
MODEL = re.compile(
    r"(?:^|_)aoti_i(?P<instances>\d+)_d(?P<delay>\d+)(?P<preferred>p)?(?P<direct>_direct)?"
    r"(?:_g(?P<gather>\d+))?"
    r"(?P<warm>_warm)?"
    r"(?P<graphs>_cg)?(?:_pool(?P<pool>\d+))?$"
)
CORES_NOTE = (
    "; *cores*: the cores perf_analyzer and the server kept busy over the load (CPU time over "
    "wall time; a side near its share of cores caps the load)"
)
BATCH_NOTE = (
    "; *batch*: rows per execution over the load (perf_analyzer's inference count over its "
    "execution count)"
)
WAYS = {None: "inline", "system": "system shm", "cuda": "CUDA shm"}
CLIENTS = {None: "", "_async": ", async client", "_capi": ", C API (Triton in perf_analyzer)",
           "_http": ", HTTP", "_stream": ", gRPC stream"}  # fmt: skip
PROTOCOL_NAMES = {"_http": "HTTP", "_stream": "a gRPC stream"}  # a load's client: else gRPC


def served_rows(data: dict, log: Path | None) -> dict:
    """The run's served rows; those only in ``log`` (a run cut short) added."""
    rows = dict(data.get("served") or {})
    if log is not None:
        for line in log.read_text(errors="replace").splitlines():
            match = ROW.match(line.strip())
            if match and match["key"] not in rows:
                try:
                    rows[match["key"]] = ast.literal_eval(match["value"])
                except (SyntaxError, ValueError):
                    continue
    return rows


def describe(model: str) -> str:
    match = MODEL.search(model)
    if not match:
        return model
    delay = int(match["delay"])
    waits = f"{delay} µs" + (" + preferred" if match["preferred"] else "") if delay else "no delay"
    waits = "no batcher" if match["direct"] else waits
    text = f"{match['instances']} inst., {waits}"
    if match["gather"]:
        text += f", gather kernel from {match['gather']} requests"
    if match["warm"]:
        text += ", warm-up at every batch size"
    if match["graphs"]:
        text += ", CUDA graphs"
    if match["pool"]:
        text += f", pools {match['pool']} MiB"
    return text


def flags(row: dict) -> str:
    """*r*/*u* (re-measured, unsettled), the cores each side kept busy (``cpu``) and the rows
    each execution carried (``server.rows_per_execution``)."""
    marks = [mark for key, mark in (("retried", "r"), ("unsettled", "u")) if row.get(key)]
    busy = row.get("cpu") or {}
    sides = [f"{side} {busy[f'{side}_cores']:.1f}" for side in ("client", "server")
             if f"{side}_cores" in busy]  # fmt: skip
    batch = (row.get("server") or {}).get("rows_per_execution")
    cores = "cores " + ", ".join(sides) if sides else ""
    measured = ", ".join(part for part in (cores, batch and f"batch {batch:.1f}") if part)
    return " ".join([*marks, measured] if measured else marks)


def render(data: dict, rows: dict, header: dict[str, str]) -> str:
    family = data.get("env", {}).get("family", "resnet50")
    measured = data.get("in_process") or {}
    in_process = {k: v for k, v in measured.items() if k.startswith("bs")}
    best_key = max(in_process, key=lambda k: in_process[k]["items_per_s"], default=None)
    best = in_process[best_key]["items_per_s"] if best_key else None
    where = "the CPU" if data.get("env", {}).get("device") == "cpu" else "the GPU"  # older: GPU
    lines = [f"# AOTInductor package served natively on {where}: {family}", ""]
    lines += ["| run | |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in header.items() if value]
    busy = any(isinstance(row, dict) and "cpu" in row for row in rows.values())
    batched = any(isinstance(row, dict) and (row.get("server") or {}).get("rows_per_execution")
                  for row in rows.values())  # fmt: skip
    lines += ["", *_notes(data.get("build") or {}, measured.get("check", {}), best_key, best,
                          busy, batched)]  # fmt: skip
    lines += _graph_sizes(data.get("env", {}).get("graph_sizes") or [])
    lines += ["", "## In process", "", "| batch | items/s | p50 ms | p95 ms | p99 ms |"]
    lines.append("|---|---|---|---|---|")
    lines += [f"| {_batch_label(key)} | {_figures(row)} |" for key, row in in_process.items()]
    lines += _first_calls(data.get("first_calls") or {})
    lines += ["", "## Served", ""]
    lines.append(
        "| served model | load | items/s | / in process | p50 ms | p95 ms | p99 ms | "
        "server ms: queue / input / infer / output | note |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|")
    lines += _served_lines(rows, best)
    lines += _load_times(rows)
    lines += _not_served(rows)
    lines += _batch_one(in_process, rows)
    lines += _outputs(rows)
    lines += [f"- step `{name}` failed; see the raw JSON" for name in data.get("errors") or {}]
    return "\n".join(lines) + "\n"


def _batch_label(key: str) -> str:
    """``bs64`` -> ``64``; ``bs64_graph`` -> ``64, CUDA graph``."""
    return key[2:].replace("_graph", ", CUDA graph")


def _figures(row: dict) -> str:
    rate = f"{row['items_per_s']:,.0f}"
    return f"{rate} | {row['p50']:.2f} | {row['p95']:.2f} | {row['p99']:.2f}"


def _notes(build: dict, check: dict, best_key: str | None, best: float | None,
           busy: bool = False, batched: bool = False) -> list[str]:  # fmt: skip
    checked = ", ".join(f"{k} {v:.4g}" for k, v in check.items())
    # A reused package was built before the run, beside the call's others (goals.sh).
    when = ", before this run, beside the call's other packages" if build.get("reused") else ""
    notes = [
        f"- Build: {build.get('build_s', '—')} s (`aoti_compile_and_package`, compiler "
        f"`{build.get('cxx', '—')}`{when}). Check in process against the eager module: "
        f"{checked}."
    ]
    cores = (CORES_NOTE if busy else "") + (BATCH_NOTE if batched else "")
    if best:
        notes.append(
            "- Served: perf_analyzer, one item a request; *r*: re-measured with longer windows, "
            f"*u*: did not settle (two windows accepted){cores}. `/ in process`: served items/s "
            f"over the in-process best ({best_key}, {best:,.0f}/s)."
        )
    return notes


def _graph_sizes(sizes: list[int]) -> list[str]:
    """The graphed rows' batch sizes, as the run configured them."""
    if not sizes:
        return []
    return [f"- CUDA graphs (the graphed rows): {len(sizes)} sizes, "
            f"{', '.join(map(str, sizes))}."]  # fmt: skip


def _served_lines(rows: dict, best: float | None) -> list[str]:
    lines = []
    for key, row in rows.items():
        match = LOAD.match(key)
        if not match or "items_per_s" not in row:
            continue
        batched = best and match["concurrency"] != "1"
        ratio = f"{row['items_per_s'] / best:.2f}" if batched else "—"
        rate, latencies = _figures(row).split(" | ", 1)
        load = f"c{match['concurrency']} {WAYS[match['shm']]}"
        load += CLIENTS[match["client"]]
        load += f" (repeat {match['rep']})" if match["rep"] else ""
        lines.append(
            f"| {describe(match['model'])} | {load} | {rate} | {ratio} | {latencies} | "
            f"{server_split(row.get('server') or {})} | {flags(row)} |"
        )
    return lines


def server_split(server: dict) -> str:
    """Triton's per-request averages. A part over a minute comes from a run before the kit
    fixed the r26 PT2 backend's statistics (timestamps passed in the wrong order, a compute
    infer below zero summed unsigned), shown as unusable rather than as time."""
    parts = [server.get(k) for k in ("queue_ms", "compute_input_ms", "compute_infer_ms",
                                     "compute_output_ms")]  # fmt: skip
    if None in parts:
        return "—"
    return " / ".join("unusable" if ms > 60_000 else f"{ms:.2f}" for ms in parts)


def _first_calls(found: dict) -> list[str]:
    """The fresh thread's first call at each batch size against its second."""
    if "first_total_s" not in found:
        return []
    sizes = len(found.get("first_ms", []))
    return [
        "",
        f"**First calls** (a fresh thread, batch sizes 1..{sizes} ascending): first calls "
        f"{found['first_total_s']} s in all against {found['second_total_s']} s for the "
        f"second; a first call's excess over the second: median {found['excess_p50_ms']} ms, "
        f"max {found['excess_max_ms']} ms.",
    ]


def _load_times(rows: dict) -> list[str]:
    loads = {k[: -len("_load")]: v["seconds"] for k, v in rows.items() if k.endswith("_load")}
    if not loads:
        return []
    each = ", ".join(f"{describe(name)} {seconds} s" for name, seconds in loads.items())
    return ["", f"**Load** (server start to ready, each model on its own server): {each}."]


def _not_served(rows: dict) -> list[str]:
    """Models whose server never became ready (``<model>_error``), with the cause recorded."""
    failed = {k[: -len("_error")]: v for k, v in rows.items() if k.endswith("_error")}
    if not failed:
        return []
    each = "; ".join(f"{describe(name)}: {error}" for name, error in failed.items())
    return ["", f"**Not served:** {each}."]


def batch_one(in_process: dict, rows: dict, c_api: bool = False) -> tuple[float, float] | None:
    """(served p50, in-process p50) at batch 1, each the fastest way (CUDA graphs or not): the
    no-delay models at c1 against ``bs1`` and ``bs1_graph``. ``c_api``: the c1 rows with Triton
    inside perf_analyzer (no gRPC) instead of the served ones."""
    alone = [r["p50"] for k, r in in_process.items() if k in ("bs1", "bs1_graph")]
    served = batch_one_rows(rows, c_api)
    return (min(served.values()), min(alone)) if served and alone else None


def batch_one_rows(rows: dict, c_api: bool = False) -> dict[str, float]:
    """The no-delay models' c1 rows (``c_api``: those inside perf_analyzer): key -> p50 ms."""
    found = {}
    for key, row in rows.items():
        load = LOAD.match(key)
        model = MODEL.search(load["model"]) if load else None
        if not model or load["concurrency"] != "1" or model["delay"] != "0" or "p50" not in row:
            continue
        if (load["client"] == "_capi") == c_api:
            found[key] = row["p50"]
    return found


def fastest_batch_one(rows: dict) -> str | None:
    """The key of the fastest served batch-1 row: the one the gap reads."""
    found = batch_one_rows(rows)
    return min(found, key=found.__getitem__) if found else None


def protocol_of(key: str | None) -> str:
    """What carried a served row's requests (its key's ``_http`` or ``_stream``, else gRPC)."""
    load = LOAD.match(key) if key else None
    return PROTOCOL_NAMES.get(load["client"], "gRPC") if load else "gRPC"


def batch_one_protocol(rows: dict) -> str:
    """The protocol of the fastest served batch-1 row: what carried the gap's part outside
    Triton."""
    return protocol_of(fastest_batch_one(rows))


def _batch_one(in_process: dict, rows: dict) -> list[str]:
    found = batch_one(in_process, rows)
    if found is None:
        return []
    served, alone = found
    text = (
        f"**Batch 1:** served p50 {served:.2f} ms (the fastest way) against {alone:.2f} ms "
        f"in process (the fastest way): **{served - alone:+.2f} ms**."
    )
    inside = batch_one(in_process, rows, c_api=True)
    if inside is not None:
        text += (
            f" Triton inside perf_analyzer (its C API, no protocol): {inside[0]:.2f} ms "
            f"({inside[0] - alone:+.2f}), so {batch_one_protocol(rows)}'s part is "
            f"{served - inside[0]:.2f} ms."
        )
    return ["", text]


def _outputs(rows: dict) -> list[str]:
    outputs = {k[: -len("_outputs")]: v for k, v in rows.items() if k.endswith("_outputs")}
    if not outputs:
        return []
    shapes = ", ".join(sorted({str(v.get("shapes")) for v in outputs.values()}))
    each = "; ".join(
        f"{name}: " + ", ".join(f"{m} {x:.4g}" for m, x in v.items() if isinstance(x, float))
        for name, v in outputs.items()
    )
    return [
        "",
        f"**Served outputs** ({len(outputs)} models, concurrent one-row requests batched "
        f"together): shapes {shapes}; {each}.",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m triton_kit.benchmarks.gpu.aoti.report",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("json", type=Path, help="the run's aoti.json / aoti-<family>.json")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--log", type=Path, help="the run's log: rows the JSON lacks")
    for name in ("command", "commit", "date", "machine", "raw", "note"):
        parser.add_argument(f"--{name}", default="", help=f"header row: {name}")
    args = parser.parse_args(argv)
    data = json.loads(args.json.read_text())
    header = {name: getattr(args, name) for name in
              ("machine", "command", "date", "commit", "raw", "note")}  # fmt: skip
    for name in ("command", "commit"):
        if header[name]:
            header[name] = f"`{header[name]}`"
    args.out.write_text(render(data, served_rows(data, args.log), header))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
