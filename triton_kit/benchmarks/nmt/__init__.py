"""NMT: one benchmark of either architecture (``run``: ``python -m triton_kit.benchmarks.nmt
[--architecture transformer|rnn]``; results/nmt.md, or results/nmt_rnn.md for the recurrent
model beside the Transformer), rendered by ``report``; what applies to which architecture is
``architectures``' table, the engines ``in_process``, ``served`` and ``ct2``, the matrix
runner ``matrix`` and its closed loops ``measure``; ``large`` builds the large random Marian."""
