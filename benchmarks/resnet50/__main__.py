"""`python -m benchmarks.resnet50`: runs benchmarks.resnet50.run."""

from benchmarks.resnet50.run import main

raise SystemExit(main())
