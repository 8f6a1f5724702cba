# Locust master and workers: the load-test users (loadtest/) over the client SDK (client/).
# Build context: the repository root (docker-compose.yml sets it).
FROM python:3.11-slim-bookworm

COPY docker/requirements-loadtest.txt /tmp/requirements-loadtest.txt
RUN python3 -m pip install --no-cache-dir -r /tmp/requirements-loadtest.txt \
    && rm /tmp/requirements-loadtest.txt

COPY client /opt/triton-kit/client
COPY loadtest /opt/triton-kit/loadtest
COPY docker/wait_for_ready.py /opt/triton-kit/docker/wait_for_ready.py
ENV PYTHONPATH=/opt/triton-kit
WORKDIR /opt/triton-kit

# nobody
USER 65534:65534
EXPOSE 8089 5557
ENTRYPOINT ["locust", "-f", "loadtest/locustfile.py"]
