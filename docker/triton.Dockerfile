# The serving image: the official Triton 24.10 container (Triton 2.51, TensorRT 10.5,
# Python 3.10 in the python backend) plus what the python-backend models import, and the kit's
# own ctranslate2 backend, which serves the default nmt (its text mode, with sentencepiece).
# Build context: the repository root (docker-compose.yml sets it).
ARG TRITON_IMAGE=nvcr.io/nvidia/tritonserver:24.10-py3

# Stage 1: the kit's ctranslate2 backend, built by the kit's own recipe (`python -m
# triton_kit.server.native_backends build ctranslate2`, as `make backends` does): the r24.10
# core/common/backend sources cloned from GitHub at their pinned commits (sources.py; git),
# the vendored CTranslate2 v4.8.1 headers, and the ctranslate2==4.8.1 wheel's libctranslate2,
# on the same base image, so the same glibc/libstdc++ the server runs with.
FROM ${TRITON_IMAGE} AS ctranslate2-backend
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake ninja-build g++ git patchelf \
        rapidjson-dev ca-certificates libsentencepiece-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m pip install --no-cache-dir "ctranslate2==4.8.1"
WORKDIR /build/triton-kit
COPY third_party/ctranslate2 third_party/ctranslate2
# The build's own modules only: triton_kit and triton_kit.server are namespace packages here.
COPY triton_kit/server/native_backends triton_kit/server/native_backends
COPY triton_kit/server/binary.py triton_kit/server/errors.py triton_kit/server/
# The backend folder Triton loads: the library, its record, and the wheel's libraries beside it
# (libctranslate2 and the libgomp it needs), found through $ORIGIN instead of site-packages;
# libsentencepiece for the backend's text mode (the default nmt build), which needs no
# other library (Debian's libsentencepiece0 depends only on libc, libgcc and libstdc++).
# TRITONSERVER: the image's own binary, so the backend NEEDs its plain libtritonserver.so.
# hadolint ignore=SC2016
RUN TRITONSERVER=/opt/tritonserver/bin/tritonserver PYTHONPATH=/build/triton-kit \
        python3 -m triton_kit.server.native_backends build ctranslate2 \
        --out /build/out --work /build/work \
    && libs="$(python3 -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("ctranslate2").origin).parents[1] / "ctranslate2.libs")')" \
    && cp "$libs"/*.so* /build/out/ctranslate2/ \
    && cp -L "$(pkg-config --variable=libdir sentencepiece)/libsentencepiece.so.0" /build/out/ctranslate2/ \
    && patchelf --set-rpath '$ORIGIN' /build/out/ctranslate2/libtriton_ctranslate2.so \
    && rm -rf /build/work

FROM ${TRITON_IMAGE}

COPY --from=ctranslate2-backend /build/out/ctranslate2 /opt/tritonserver/backends/ctranslate2

COPY docker/requirements-triton.txt /tmp/requirements-triton.txt
RUN python3 -m pip install --no-cache-dir -r /tmp/requirements-triton.txt \
    && rm /tmp/requirements-triton.txt

# Every model_repository/<model>/1/model.py is a one-line import from triton_kit.python_models;
# the python backend's stub inherits PYTHONPATH.
COPY triton_kit/python_models /opt/triton-kit/triton_kit/python_models
COPY docker/wait_for_ready.py /opt/triton-kit/docker/wait_for_ready.py
# The stop path when no launcher runs Triton (compose entrypoint, Kubernetes preStop):
# triton_kit/server/drain.py needs only triton_kit/server/security.py and the stdlib (triton_kit and
# triton_kit.server are namespace packages here).
COPY docker/drain-on-stop.sh /opt/triton-kit/docker/drain-on-stop.sh
COPY triton_kit/server/drain.py triton_kit/server/security.py /opt/triton-kit/triton_kit/server/
ENV PYTHONPATH=/opt/triton-kit

# The official image ships the unprivileged `triton-server` user (uid 1000); serve as it
# (numeric, so the host and Kubernetes runAsNonRoot can check it).
USER 1000:1000

EXPOSE 8000 8001 8002
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=6 \
    CMD ["python3", "/opt/triton-kit/docker/wait_for_ready.py", "--timeout", "0", "http://localhost:8000/v2/health/ready"]
CMD ["tritonserver", "--model-repository=/models", "--strict-readiness=true"]
