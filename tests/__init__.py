"""The suite: tests/unit/<package>/ need no server (seconds); tests/integration/ start a real
Triton (marker ``server``); tests/support/ holds the helpers both share."""
