"""`python -m triton_kit.benchmarks.resnet50`: runs benchmarks.resnet50.run."""

from triton_kit.benchmarks.resnet50.run import main

raise SystemExit(main())
