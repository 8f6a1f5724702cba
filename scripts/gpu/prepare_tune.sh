#!/usr/bin/env bash
# Here (with PyPI): the carry for `python -m triton_kit.loadtest tune` on the lent GPU machine
# (scripts/gpu/tune.sh), which has no package index. TUNE_CARRY (default .whl-tune, git-ignored)
# gets what a tune run uses of CARRY (default .whl, made by scripts/gpu/prepare.sh: the trimmed
# server, clients, perf_analyzer, Triton's backend sources and Debian packages) and
# model-analyzer.tar.xz: Triton Model Analyzer 1.58 and what it imports that the machine's
# Python 3.12 lacks (optuna 3.6.1 with SQLAlchemy, alembic, Mako, colorlog; gevent,
# geventhttpclient and brotli for tritonclient.http; docker, pdfkit, importlib-metadata with
# lazy-importer, distro, httplib2), and protobuf 6: Model Analyzer reads FieldDescriptor.label,
# which protobuf 7 removed (the machine's version is not known here; tune.sh puts this tree
# first for Model Analyzer only). Installed for --target like clients.tar.xz. Everything else
# it imports (numpy, numba, matplotlib, pandas, psutil, requests, prometheus-client, grpcio,
# PyYAML, tqdm) is the machine's; tritonclient 2.51 and python-rapidjson come from
# clients.tar.xz.
# Why a carry of its own: a call carries at most 64 MiB with the checkout, and CARRY with the
# model analyzer would not fit; a tune run serves no python model, so CARRY's numpy 1.26
# wheel (18 MB, for the python stubs) stays out (bench.sh then makes no stub venv).
# Then on the device: TRITON_KIT_GPU_NATIVE=pytorch TRITON_KIT_GPU_AOTI=0 \
#     bash scripts/gpu/bench.sh TUNE_CARRY "$OUT" --script scripts/gpu/tune.sh
set -euo pipefail
tune=${1:-.whl-tune}
carry=${2:-.whl}
py=${PYTHON:-python3}
for f in clients.tar.xz trimmed-server.tar.xz perf_analyzer.xz commit; do
    test -f "$carry/$f" || { echo "$carry/$f missing: run scripts/gpu/prepare.sh $carry first" >&2; exit 1; }
done
rm -rf "$tune" && mkdir -p "$tune"
cp -a "$carry"/{clients.tar.xz,trimmed-server.tar.xz,perf_analyzer.xz,tokenizer.json,debs,triton-src} "$tune/"
git rev-parse --short HEAD > "$tune/commit"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$work/wheels" \
    'triton-model-analyzer==1.58.0' 'optuna==3.6.1' 'sqlalchemy>=2,<2.2' 'alembic>=1.5' 'mako' \
    'colorlog' 'importlib-metadata>=7.1' 'pdfkit' 'docker>=4.3.1' 'gevent>=22.08' 'greenlet' \
    'zope.event' 'zope.interface' 'geventhttpclient>=2.0.2' 'brotli' 'lazy-importer' 'distro' 'httplib2' \
    'protobuf>=6.31,<7'
"$py" -m pip install -q --no-index --no-deps --no-compile --target "$work/site" \
    --python-version 3.12 --only-binary=:all: "$work"/wheels/*.whl
# No console scripts (their shebang is this machine's Python: tune.sh writes its own), no
# tests or C sources, and SQLAlchemy without its optional Cython modules (each has a pure
# Python twin; optuna runs with in-memory storage): 4.5 MB instead of 11.
rm -rf "$work/site/bin"
find "$work/site" \( -name tests -o -name '*.pyx' -o -name '*.pxd' -o -name '*.c' -o -name '*.h' \) \
    -prune -exec rm -rf {} +
find "$work/site/sqlalchemy" -name '*_cy.cpython-*.so' -delete
tar -C "$work/site" -cJf "$tune/model-analyzer.tar.xz" .
du -sh "$tune"/* | sort -h
echo "tune carry: $(du -sm "$tune" | cut -f1) MiB (a call carries at most 64 MiB with the checkout)"
