"""``python -m loadtest.tune`` is ``python -m loadtest tune``."""

import sys

from loadtest.tune.cli import main

sys.exit(main())
