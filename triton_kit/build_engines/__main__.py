import sys

from triton_kit.build_engines.cli import main

sys.exit(main())
