"""`python -m triton_kit.benchmarks.nmt [--architecture transformer|rnn]`: runs benchmarks.nmt.run
(the recurrent model's benchmark, benchmarks.nmt.rnn, with ``--architecture rnn``)."""

from triton_kit.benchmarks.nmt.run import main

raise SystemExit(main())
