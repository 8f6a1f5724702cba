"""BERT's python models.

- ``text``: tokenization with length buckets (``tokenize``, ``bucket_lengths``, ``pad_rows``)
  and ``BertTokenizerModel``, the stand-alone tokenizer of the ``bert_ensemble``.
- ``model``: ``BertEmbeddingModel``, the served ``bert``: tokenises, buckets and pads, and
  calls the encoder model (``bert_model``, run by Triton's own backend) through BLS.
"""
