#!/usr/bin/env bash
# The native gRPC sidecar of the Locust gRPC user (triton_kit/loadtest/sidecar/native/grpc_sidecar.cc) into the
# venv as VENV/bin/triton-kit-grpc-sidecar, where triton_kit/loadtest/sidecar/client.py looks for it.
# Why a build: the Python sidecar's grpc.aio costs about 0.15 ms of CPU per call, taken from
# the Triton server on the same cores; the C++ one about 0.09 ms (benchmarks/results/loadgen.md).
# Needs g++, pkg-config and Debian's libgrpc++-dev and nlohmann-json3-dev (scripts/install-system-deps.sh installs
# them as root). Without them it says so and exits 0: the load test then uses the Python
# sidecar and the native tests skip, both naming this script.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${1:-.venv}
venv=$(cd "$venv" && pwd)
source_dir=triton_kit/loadtest/sidecar/native
target="$venv/bin/triton-kit-grpc-sidecar"
sources=("$source_dir"/grpc_sidecar.cc)
if [[ -x "$target" ]] && [[ -z $(find "${sources[@]}" -newer "$target") ]]; then
    exit 0
fi
if ! command -v g++ >/dev/null 2>&1 || ! pkg-config --exists grpc++ 2>/dev/null ||
    ! pkg-config --exists nlohmann_json 2>/dev/null; then
    echo "build-native-sidecar: SKIPPED: needs g++, pkg-config, libgrpc++-dev and nlohmann-json3-dev" \
        "(run 'sudo scripts/install-system-deps.sh'); the Locust gRPC user falls back to" \
        "the Python sidecar" >&2
    exit 0
fi
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
g++ -std=c++17 -O2 -Wall -Wextra -o "$target.tmp" "$source_dir/grpc_sidecar.cc" \
    $(pkg-config --cflags --libs grpc++ nlohmann_json) -pthread
mv "$target.tmp" "$target"
echo "build-native-sidecar: built $target"
