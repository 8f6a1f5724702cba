# The serving image: the official Triton 24.10 container (Triton 2.51, TensorRT 10.5,
# Python 3.10 in the python backend) plus what the python-backend models import.
# Build context: the repository root (docker-compose.yml sets it).
ARG TRITON_IMAGE=nvcr.io/nvidia/tritonserver:24.10-py3
FROM ${TRITON_IMAGE}

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
