# One-shot image that compiles the TensorRT plans on the deployment host's GPU.
# It starts FROM the serving image's base so the TensorRT that builds the plans is the
# TensorRT that deserialises them (a plan only loads on the version that built it).
# Build context: the repository root (docker-compose.yml sets it).
ARG TRITON_IMAGE=nvcr.io/nvidia/tritonserver:24.10-py3
FROM ${TRITON_IMAGE}

# The Triton image ships the TensorRT libraries but not the TensorRT Python package.
# 24.10 has TensorRT 10.5; check_tensorrt_version.py fails the build if they disagree.
# TENSORRT_VERSION is major.minor.patch; ".*" also matches PyPI's four-part versions
# (10.8.0.43 and later), and still pins 10.5.0 exactly.
ARG TENSORRT_VERSION=10.5.0

COPY docker/requirements-build.txt /tmp/requirements-build.txt
RUN python3 -m pip install --no-cache-dir -r /tmp/requirements-build.txt \
        "tensorrt-cu12==${TENSORRT_VERSION}.*" \
    && rm /tmp/requirements-build.txt

COPY docker/check_tensorrt_version.py /opt/triton-kit/docker/check_tensorrt_version.py
RUN python3 /opt/triton-kit/docker/check_tensorrt_version.py

COPY triton_kit/build_engines /opt/triton-kit/triton_kit/build_engines
COPY triton_kit/python_models /opt/triton-kit/triton_kit/python_models
# triton_kit/server/plan_check.py: Kubernetes runs it from this image before Triton serves the plans.
COPY triton_kit/server /opt/triton-kit/triton_kit/server
ENV PYTHONPATH=/opt/triton-kit
WORKDIR /opt/triton-kit

# NVIDIA's entrypoint first: it sets up CUDA forward compatibility on older data-centre
# drivers (docs/deploy.md lists them) and prints the driver/GPU banner.
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh", "python3", "-m", "triton_kit.build_engines"]
CMD ["all", "--engine", "tensorrt", "--output-repository", "/models"]
