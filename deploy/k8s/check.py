"""Render the Kustomize overlays and validate every object offline (`make k8s-check`).

No cluster runs here, so this is what stands in for `kubectl apply --dry-run=server`:
built-in kinds against the Kubernetes OpenAPI schemas that `kubernetes-validate` ships,
custom resources against the CRD schemas in schemas/, both strict (unknown fields fail).
The policy scan (checkov) runs from the Makefile in its own virtual environment.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

HERE = Path(__file__).resolve().parent
TARGETS = {"gpu": HERE / "overlays/gpu", "cpu": HERE / "overlays/cpu", "kserve": HERE / "kserve"}
# Oldest and newest Kubernetes minor releases the manifests are checked against.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")


def render(target: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize` output as a list of objects."""
    kubectl = shutil.which("kubectl") or shutil.which(
        "kubectl", path=str(Path(sys.executable).parent)
    )
    if kubectl is None:
        raise SystemExit("kubectl is not installed: run `bash scripts/install-system-deps.sh`")
    result = subprocess.run(
        [kubectl, "kustomize", str(target)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"kubectl kustomize {target} failed:\n{result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def _closed(schema: Any) -> Any:
    """The schema with unknown fields refused wherever the CRD lists its properties."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: _closed(value) for key, value in schema.items()}
    if (
        "properties" in closed
        and "additionalProperties" not in closed
        and not closed.get("x-kubernetes-preserve-unknown-fields")
    ):
        closed["additionalProperties"] = False
    return closed


def crd_schema(obj: dict[str, Any]) -> dict[str, Any] | None:
    group, _, version = obj["apiVersion"].rpartition("/")
    path = HERE / "schemas" / f"{group}_{version}_{obj['kind']}.json.gz"
    if not path.exists():
        return None
    schema = json.loads(gzip.decompress(path.read_bytes()))
    # apiVersion/kind/metadata are the API server's; the CRD schemas leave them open.
    schema.setdefault("properties", {}).setdefault("metadata", {"type": "object"})
    return _closed(schema)


def problems(obj: dict[str, Any]) -> list[str]:
    """Every schema violation of one object, for each Kubernetes version checked."""
    name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    found = []
    if "/" in obj["apiVersion"] and "." in obj["apiVersion"].split("/")[0]:
        schema = crd_schema(obj)
        if schema is not None:
            validator = jsonschema.Draft7Validator(schema)
            found += [f"{name}: {e.json_path}: {e.message}" for e in validator.iter_errors(obj)]
            return found
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            where = "/".join(map(str, error.path))
            found.append(f"{name} (Kubernetes {version}): {where}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError:
            found.append(f"{name}: no schema for {obj['apiVersion']} {obj['kind']}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("build/k8s"), help="rendered YAML")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    for label, target in TARGETS.items():
        objects = render(target)
        (args.out / f"{label}.yaml").write_text(yaml.safe_dump_all(objects, sort_keys=False))
        for obj in objects:
            failed += [f"{label}: {p}" for p in problems(obj)]
        print(f"k8s-check: {label}: {len(objects)} objects rendered to {args.out}/{label}.yaml")
    for line in failed:
        print(f"k8s-check: INVALID {line}", file=sys.stderr)
    if not failed:
        print(f"k8s-check: every object valid (Kubernetes {', '.join(KUBERNETES_VERSIONS)})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
