"""``python -m triton_kit.loadtest.tune`` is ``python -m triton_kit.loadtest tune``."""

import sys

from triton_kit.loadtest.tune.cli import main

sys.exit(main())
