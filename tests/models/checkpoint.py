"""A transformers checkpoint folder as a user has one, made locally (no hub): a seeded tiny Llama saved
with save_pretrained, a byte-level BPE tokenizer trained here with the `tokenizers` package on a few
hundred lines of text, special tokens and a chat template in tokenizer_config.json. Used by
tests/python/test_pretrained.py and tests/fixtures/make.py (tok_llama, for tests/js/tokenizer.test.js
and tests/browser/tokenizer.test.js), with the cases both compare against transformers.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

BOS, EOS, PAD = "<s>", "<|im_end|>", "<pad>"
SPECIALS = [BOS, "</s>", PAD, "<|im_start|>", EOS]
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}{{ raise_exception('unknown role ' + message['role']) }}{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] | trim }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

WORDS = (
    "the model reads a token and writes the next one while the cache keeps every key and value "
    "état café naïve über straße 東京 日本語 の テキスト 你好 世界 привет мир ελληνικά 🙂 🚀 "
    "hello world tandem browser wasm export prefill decode state 1234 56.78 ( ) [ ] { } , . ! ? ; : - _ ' \""
).split()

# The texts every host encodes and decodes against transformers: non-ASCII (accents, CJK, emoji,
# Cyrillic, a character the corpus never had), runs of spaces, tabs and newlines, special tokens
# written in the text, an empty string.
TEXTS = [
    "Hello world",
    "hello  world   with    runs of spaces",
    "  leading and trailing spaces  ",
    "tabs\tand\nnew\n\nlines\r\n",
    "café naïve über straße — état",
    "東京の日本語テキスト 你好世界",
    "emoji 🙂🚀 and 🦀 (never seen)",
    "привет мир, ελληνικά",
    "<|im_start|>user\nhi there<|im_end|>\n",
    "text with <s> inside and </s> at the end",
    "numbers 1234 56.78 and punctuation!?;:",
    "",
    "a",
    "\u00e9\u0301 combining marks and \u200b zero width",
]

CHATS = [
    [{"role": "user", "content": "Hello, who are you?"}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "  Explain the cache. "},
        {"role": "assistant", "content": "It keeps keys and values."},
        {"role": "user", "content": "Und auf Deutsch? 日本語も"},
    ],
]

PROMPT = "the model reads a token and"


def corpus(n: int = 400, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 14))]
        sep = rng.choice([" ", " ", " ", "  ", "\t", " \n"])
        lines.append(sep.join(words))
    return lines


def make_tokenizer(vocab_size: int = 400, texts=None):
    """A byte-level BPE trained on `texts` (default corpus()), BOS added to every encoding, wrapped as
    transformers' fast tokenizer with the special tokens and the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus() if texts is None else texts, trainer)
    bos = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos)]),
        ]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHAT_TEMPLATE,
    )


def make_checkpoint(folder: Path, seed: int = 0, max_position_embeddings: int = 128):
    """Writes the checkpoint folder; returns (model, tokenizer) as transformers loads them from it."""
    import torch
    import transformers

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = make_tokenizer()
    tokenizer.save_pretrained(folder)
    # the chat template in tokenizer_config.json, as most checkpoints on the hub keep it
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = CHAT_TEMPLATE
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False))
    (folder / "chat_template.jinja").unlink(missing_ok=True)

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    model.save_pretrained(folder)
    return load_reference(folder)


def load_reference(folder: Path):
    """(model, tokenizer) as transformers loads them from the folder: the reference."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32).eval()
    return model, tokenizer


def reference_cases(model, tokenizer, max_new_tokens: int = 12) -> dict:
    """What transformers gives on TEXTS, CHATS and a greedy generation from PROMPT (plain JSON)."""
    import torch

    texts = []
    for t in TEXTS:
        ids = tokenizer(t)["input_ids"]
        texts.append(
            {
                "text": t,
                "ids": ids,
                "ids_no_special": tokenizer(t, add_special_tokens=False)["input_ids"],
                "decoded": tokenizer.decode(ids),
                "decoded_skip": tokenizer.decode(ids, skip_special_tokens=True),
            }
        )
    chats = []
    for messages in CHATS:
        for gen in (False, True):
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
            ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=gen, return_dict=False)
            chats.append({"messages": messages, "add_generation_prompt": gen, "text": text, "ids": list(ids)})

    def greedy(ids):
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id)
        return out[0, len(ids) :].tolist()

    prompt_ids = tokenizer(PROMPT)["input_ids"]
    chat_ids = list(tokenizer.apply_chat_template(CHATS[0], tokenize=True, add_generation_prompt=True, return_dict=False))
    gen = greedy(prompt_ids)
    chat_gen = greedy(chat_ids)
    eos = tokenizer.eos_token_id
    cut = lambda ids: ids[: ids.index(eos)] if eos in ids else ids  # noqa: E731  generate() stops before eos
    return {
        "texts": texts,
        "chats": chats,
        "generate": {
            "prompt": PROMPT,
            "prompt_ids": prompt_ids,
            "tokens": cut(gen),
            "text": tokenizer.decode(cut(gen), skip_special_tokens=True),
            "max_new_tokens": max_new_tokens,
        },
        "chat_generate": {
            "messages": CHATS[0],
            "prompt_ids": chat_ids,
            "tokens": cut(chat_gen),
            "text": tokenizer.decode(cut(chat_gen), skip_special_tokens=True),
        },
        "special": {
            "bos_token": tokenizer.bos_token,
            "eos_token": tokenizer.eos_token,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": eos,
            "vocab_size": len(tokenizer),
        },
    }
