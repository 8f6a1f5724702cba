"""BERT's python models.

- ``text``: tokenization with length buckets (``tokenize``, ``bucket_lengths``, ``pad_rows``)
  and ``BertTokenizerModel``, the stand-alone tokenizer of the ``bert_ensemble``.
- ``model``: ``BertEmbeddingModel``, the served ``bert`` (tokenizer and encoder in one model).
- ``torch_encoder``: the encoder as a sibling's TorchScript in-process (CUDA graphs on a GPU).
"""
