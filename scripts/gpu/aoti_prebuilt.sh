#!/usr/bin/env bash
# The pytorch_aoti backend (scripts/gpu/aoti_backend.sh) carried prebuilt to the lent GPU
# machine instead of built there, on machines that go back after every call: session 46's engine
# calls spent 61-63 s of setup building it and unpacking the carry (the build's share is not
# timed apart; `backends-build.log` now says which way each call went). A prebuilt backend is
# used only where it was built from the same inputs: this checkout's aoti_backend.sh and pinned
# sources, the same build options, and the machine's own torch (version, install path, CUDA or
# not). It must also link there, every symbol resolved against the machine's torch and the
# trimmed server. Anything else: build.
#
#   aoti_prebuilt.sh key                 the inputs' key on this machine (stdout)
#   aoti_prebuilt.sh pack LIB TAR        LIB with this machine's key, as TAR (xz), there after a
#                                        build: a later session carries it (.gpu-prebuilt/, which
#                                        scripts/gpu/prepare_goals.sh puts into the carry)
#   aoti_prebuilt.sh use TAR DEST        DEST/libtriton_pytorch_aoti.so from TAR, exit 0; or exit
#                                        1 with the reason on stderr
# PYTHON: the python with the machine's torch (default python3). TRITON_KIT_SERVER_LIBS: where
# the trimmed server's libraries are (default /tmp/site/nvidia_pytriton.libs, bench.sh's).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
name=libtriton_pytorch_aoti.so

key() {
    {
        cat "$root/scripts/gpu/aoti_backend.sh" "$root/third_party/triton-aoti/SHA256SUMS"
        echo "utils=${TRITON_KIT_AOTI_BACKEND_UTILS:-} type=${TRITON_KIT_AOTI_BUILD_TYPE:-Release}"
        "$py" -c 'import torch; print(torch.__version__, torch.__file__, torch.version.cuda)'
    } | sha256sum | cut -d' ' -f1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case ${1:-} in
    key) key ;;
    pack)
        cp "$2" "$work/$name" && key > "$work/key"
        tar -C "$work" -cJf "$3" "$name" key
        ;;
    use)
        tar=$2; dest=$3
        tar -C "$work" -xJf "$tar"
        if [[ "$(cat "$work/key")" != "$(key)" ]]; then
            echo "prebuilt $name: built from other inputs or against another torch" >&2; exit 1
        fi
        libs=${TRITON_KIT_SERVER_LIBS:-/tmp/site/nvidia_pytriton.libs}
        if ! LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$py" -c \
                'import ctypes, os, sys, torch; ctypes.CDLL(sys.argv[1], os.RTLD_NOW | os.RTLD_GLOBAL)' \
                "$work/$name" 2> "$work/link.log"; then
            echo "prebuilt $name: does not link here: $(tail -1 "$work/link.log")" >&2; exit 1
        fi
        mkdir -p "$dest" && cp "$work/$name" "$dest/$name"
        ;;
    *) echo "usage: $0 key | pack LIB TAR | use TAR DEST" >&2; exit 2 ;;
esac
