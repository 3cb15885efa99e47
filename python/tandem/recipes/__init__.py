"""Model-family recipes: a model of a known family (Hugging Face transformers' causal LMs and
encoder-decoders, a checkpoint folder) exported with the methods its hosts call, through
tandem.export. Users call them as `tandem.transformers.*` (transformers.py).

- `checks`: the arguments every recipe checks;
- `causal_lm`: decoder-only LMs (a static KV cache, or recurrent state), and `prefill` over a loaded one;
- `seq2seq`: encoder-decoders over transformers' EncoderDecoderCache;
- `pretrained`: a checkpoint folder, its tokenizer included, through the recipe its config names.
"""
