# Locust master and workers: the load-test users (triton_kit/loadtest/) over the client SDK (triton_kit/client/).
# Build context: the repository root (docker-compose.yml sets it).
# The gRPC users' native sidecar (triton_kit/loadtest/sidecar/native), built where its compiler and headers are.
FROM python:3.11-slim-bookworm AS sidecar
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        g++=4:12.2.0-3 pkg-config=1.8.1-1 libgrpc++-dev=1.51.1-3+b1 nlohmann-json3-dev=3.11.2-2 \
    && rm -rf /var/lib/apt/lists/*
COPY triton_kit/loadtest/sidecar/native /src/triton_kit/loadtest/sidecar/native
COPY scripts/build-native-sidecar.sh /src/scripts/build-native-sidecar.sh
RUN bash /src/scripts/build-native-sidecar.sh /usr/local \
    && test -x /usr/local/bin/triton-kit-grpc-sidecar

FROM python:3.11-slim-bookworm

# gRPC's runtime for the native sidecar (without it the users fall back to the Python one).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgrpc++1.51=1.51.1-3+b1 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=sidecar /usr/local/bin/triton-kit-grpc-sidecar /usr/local/bin/triton-kit-grpc-sidecar
ENV TRITON_KIT_NATIVE_SIDECAR=/usr/local/bin/triton-kit-grpc-sidecar

COPY docker/requirements-loadtest.txt /tmp/requirements-loadtest.txt
RUN python3 -m pip install --no-cache-dir -r /tmp/requirements-loadtest.txt \
    && rm /tmp/requirements-loadtest.txt

COPY triton_kit/client /opt/triton-kit/triton_kit/client
COPY triton_kit/loadtest /opt/triton-kit/triton_kit/loadtest
COPY docker/wait_for_ready.py /opt/triton-kit/docker/wait_for_ready.py
ENV PYTHONPATH=/opt/triton-kit
WORKDIR /opt/triton-kit

# nobody
USER 65534:65534
EXPOSE 8089 5557
ENTRYPOINT ["locust", "-f", "triton_kit/loadtest/locustfile.py"]
