"""The gRPC transport of the Locust users: a sidecar process per worker (``server``: Python,
``native``: C++), the frames both speak (``wire``), the client side gevent waits on
(``client``), and the gevent-patched grpc bridge (``gevent_grpc``)."""
