"""Add to a run to get the stepped load:
``locust -f triton_kit/loadtest/locustfile.py,triton_kit/loadtest/stepped.py``.

Kept apart from locustfile.py so that the web dashboard keeps Locust's usual user-count
and spawn-rate controls; Locust uses any shape class a locustfile defines.
"""

from triton_kit.loadtest.shape import SteppedShape

__all__ = ["SteppedShape"]
