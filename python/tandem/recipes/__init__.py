"""Model-family recipes: a model of a known family (Hugging Face transformers' causal LMs and
encoder-decoders, a checkpoint folder) exported with the methods its hosts call, through
tandem.export. Users call them as `tandem.transformers.*` (transformers.py).

- `checks`: the arguments every recipe checks;
- `causal_lm`: decoder-only LMs (a static KV cache, or recurrent state), and `prefill` over a loaded one;
- `state_argument`: an LM whose forward takes its past as an argument and gives it back (RWKV);
- `audio_lm`: decoder-only LMs that merge audio into their token stream (prefill_audio beside the causal LM's methods),
  or stream it with every token (prefill_audio and decode_audio);
- `codec_lm`: decoder-only LMs whose every position reads a frame of their own codec's codes (encode beside them);
- `uncached`: a causal LM whose cache cannot be exported, run with no cache over the token ids seen so far;
- `seq2seq`: encoder-decoders over transformers' EncoderDecoderCache;
- `pretrained`: a checkpoint folder, its tokenizer included, through the recipe its config names.
"""
