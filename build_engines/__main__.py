import sys

from build_engines.cli import main

sys.exit(main())
