"""The one error ``python -m triton_kit.loadtest tune`` reports to the user (exit 2) instead of
a trace."""


class TuneError(Exception):
    """Bad input or a failed step, with a message that says what to do."""
