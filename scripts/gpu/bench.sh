#!/usr/bin/env bash
# On the lent GPU machine (carry made by scripts/gpu/prepare.sh): the clients and the trimmed
# nvidia-pytriton server go into /tmp/site for the launcher and clients (the machine's numpy
# 2.5, torch, transformers),
# and the python stubs get their own venv with numpy 1.26 ahead of the machine's packages.
#
# Why: Triton 2.51's python stub ignores PYTHONPATH and takes sys.path from the venv of the
# `python3` first on PATH (a python-backend I/O probe showed it; git: scripts/gpu/probe_io.py), and its numpy interop needs numpy<2
# (nvidia-pytriton pins it): under numpy 2.5 as_numpy() read every input as its first
# element repeated and pb_utils.Tensor outputs came back empty.
# Usage: scripts/gpu/bench.sh CARRY_DIR OUT_DIR [python -m args...]
#    or: scripts/gpu/bench.sh CARRY_DIR OUT_DIR --script FILE [args...]: after the setup, runs
#        `bash FILE CARRY_DIR OUT_DIR args...` instead (e.g. scripts/gpu/tune.sh), with
#        TRITON_KIT_GPU_STARTED set to the second this script started (for its own time budget).
# A carry without the numpy 1.26 wheel (scripts/gpu/prepare_tune.sh) gets no stub venv: a run
# for engines served by Triton's own backends only.
set -euo pipefail
export TRITON_KIT_GPU_STARTED=$(date +%s)
carry=$1; out=$2; shift 2
install() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$@"; }
mkdir -p /tmp/site
tar -C /tmp/site -xJf "$carry/clients.tar.xz"
tar -C /tmp/site -xJf "$carry/trimmed-server.tar.xz"
if [[ -f "$carry/perf_analyzer.xz" ]]; then
    # Its NEEDED names are the unrenamed ones; the trimmed server carries the same libraries.
    mkdir -p /tmp/site/bin /tmp/site/pa-libs
    xz -dc "$carry/perf_analyzer.xz" > /tmp/site/bin/perf_analyzer.real
    chmod +x /tmp/site/bin/perf_analyzer.real
    ln -sf /tmp/site/nvidia_pytriton.libs/libb64-*.so.0d /tmp/site/pa-libs/libb64.so.0d
    ln -sf /tmp/site/nvidia_pytriton.libs/libcudart-*.so.12* /tmp/site/pa-libs/libcudart.so.12
    printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/site/pa-libs:/tmp/site/nvidia_pytriton.libs exec /tmp/site/bin/perf_analyzer.real "$@"\n' > /tmp/site/bin/perf_analyzer
    chmod +x /tmp/site/bin/perf_analyzer
    export PERF_ANALYZER=/tmp/site/bin/perf_analyzer
fi
# cuda-python 12.9 for tritonclient 2.51's CUDA shared memory, in its own folder on PYTHONPATH
# (ahead of any cuda-python 13 of the machine's, which lacks `cuda.cudart`).
mkdir -p /tmp/cuda-site
if [[ -f "$carry/cuda-shm.tar.xz" ]]; then tar -C /tmp/cuda-site -xJf "$carry/cuda-shm.tar.xz"; fi
# Triton's own backends, built there against the machine's torch (CUDA) and onnxruntime: the
# headers and patchelf come unpacked from the carried Debian packages (not into /).
if [[ -d "$carry/debs" ]]; then
    for deb in "$carry"/debs/*.deb; do dpkg -x "$deb" /tmp/debs; done
    # CPLUS_INCLUDE_PATH, not CPATH: system headers, so -Werror does not stop at their warnings.
    export CPLUS_INCLUDE_PATH=/tmp/debs/usr/include${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH} PATH=/tmp/debs/usr/bin:$PATH \
        CMAKE_PREFIX_PATH=/tmp/debs/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
    native() { PYTHONPATH=/tmp/site:$PWD python3 -m triton_kit.server.native_backends build \
        --sources "$carry/triton-src" --jobs "$(nproc)" "$@"; }
    # TRITON_KIT_GPU_NATIVE names which of Triton's r24.10 backends to build (default both;
    # "pytorch" alone saves a minute, "" none: a run that needs only pytorch_aoti).
    native_wanted=" ${TRITON_KIT_GPU_NATIVE-pytorch onnxruntime} "
    if [[ "$native_wanted" == *" pytorch "* ]]; then
        native pytorch 2>&1 | tee "$out/backends-build.log" || { cp build/triton-backends/.work/*.log "$out/" 2>/dev/null; exit 1; }
    fi
    # The machine's onnxruntime is CPU-only; the GPU run serves TorchScript, so a failure
    # here is logged, not fatal (the launcher refuses any model that would need it).
    if [[ "$native_wanted" == *" onnxruntime "* ]]; then
        native onnxruntime 2>&1 | tee -a "$out/backends-build.log" || true
    fi
    # Triton's newer pytorch backend, for AOTInductor packages (served as pytorch_aoti);
    # TRITON_KIT_GPU_AOTI=0 skips it (a minute of device time) for runs that do not serve one.
    # A carried prebuilt one (aoti-prebuilt.tar.xz) is taken where scripts/gpu/aoti_prebuilt.sh
    # finds it built from the same inputs against this machine's torch, and linking here; else
    # it is built, and packed into OUT/prebuilt/ for a later session's carry.
    aoti_lib=/tmp/aoti-backend/libtriton_pytorch_aoti.so
    if [[ -d third_party/triton-aoti && "${TRITON_KIT_GPU_AOTI:-1}" != 0 ]]; then
        if [[ -f "$carry/aoti-prebuilt.tar.xz" ]] && bash scripts/gpu/aoti_prebuilt.sh use \
                "$carry/aoti-prebuilt.tar.xz" /tmp/aoti-backend 2>> "$out/backends-build.log"; then
            echo "prebuilt $aoti_lib: carried, built from these inputs, links here" | tee -a "$out/backends-build.log"
            export TRITON_KIT_AOTI_BACKEND=$aoti_lib
        elif PYTHONPATH=/tmp/site:$PWD bash scripts/gpu/aoti_backend.sh "$carry" /tmp/aoti-backend 2>&1 \
                | tee -a "$out/backends-build.log"; then
            export TRITON_KIT_AOTI_BACKEND=$aoti_lib
            mkdir -p "$out/prebuilt"
            bash scripts/gpu/aoti_prebuilt.sh pack "$aoti_lib" "$out/prebuilt/aoti-prebuilt.tar.xz" || true
        fi
    fi
fi
venv=/tmp/stub-venv
# numpy 1.26 for the stubs: a wheel (scripts/gpu/prepare.sh's carry) or a trimmed tree packed
# with xz (scripts/gpu/prepare_goals.sh's, half the wheel's size).
if compgen -G "$carry/numpy-*.whl" > /dev/null || [[ -f "$carry/numpy-stub.tar.xz" ]]; then
    python3 -m venv --without-pip "$venv"
    stub_site=$("$venv/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    if [[ -f "$carry/numpy-stub.tar.xz" ]]; then
        tar -C "$stub_site" -xJf "$carry/numpy-stub.tar.xz"
    else
        install "$stub_site" "$carry"/numpy-*.whl
    fi
    python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$stub_site/zz-machine.pth"
    export TRITON_KIT_STUB_PYTHON=$venv/bin/python3
fi
if [[ -f "$carry/commit" ]]; then export TRITON_KIT_COMMIT=$(cat "$carry/commit"); fi
export PYTHONPATH=/tmp/site:/tmp/cuda-site:$PWD PYTHONUNBUFFERED=1
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
"${TRITON_KIT_STUB_PYTHON:-python3}" -c 'import numpy, torch; print("stub numpy", numpy.__version__, "torch", torch.__version__)' | tee "$out/versions.txt"
python3 -c 'import tritonclient.utils.cuda_shared_memory; print("ok")' 2>&1 | tail -1 | sed 's/^/cuda shm import: /' | tee -a "$out/versions.txt" || true
# Default: the whole benchmark (pass e.g. `triton_kit.benchmarks.gpu --out "$out" --quick` to change it;
# keep --tokenizer for the MiniLM rows).
if [[ $# -eq 0 ]]; then set -- triton_kit.benchmarks.gpu --out "$out" --tokenizer "$carry/tokenizer.json"; fi
if [[ "$1" == --script ]]; then
    bash "$2" "$carry" "$out" "${@:3}" 2>&1 | tee "$out/run.log"
else
    python3 -m "$@" 2>&1 | tee "$out/run.log"
fi
