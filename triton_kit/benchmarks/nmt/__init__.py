"""NMT: in-process search against Triton and CTranslate2 (``run``, rendered by ``report``,
results/nmt.md), the recurrent model beside the Transformer (``rnn``,
``python -m triton_kit.benchmarks.nmt --architecture rnn``, results/nmt_rnn.md); ``large``
builds the large random Marian."""
