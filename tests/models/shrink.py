"""Any transformers config made tiny by the roles its fields' names give them (layers, heads, widths,
vocabulary, experts), never by a per-model table (tests/models/zoo.py builds every registered class
from its config class with it).

`shrink(config, vocab_size)` is the smallest form: two layers, widths of 8 to 64 (a speech model's
input-feature widths, its mel bins, kept as its feature extractor makes them), a codec's base count of
filters 4. Some configs check
relations between their fields (a head width times the heads equals an inner width, layer counts
that sum to the total, per-layer lists as long as the layers) or leave sizes None that their
checkpoints set; the walk then tries the next of `SHRINKS`:
- `consistent`: every None size its role names is filled (a head width from the hidden size and the
  heads, experts, top-k, groups), a head width keeps its product with its heads as a multiple of the
  hidden size (hidden * expand = heads * head_dim), a width that was a multiple or a fraction of the
  hidden size stays one, a count of groups of heads divides the heads, and a count that was the sum
  of two or three others of its role stays their sum, or a whole multiple of a count per part
  (num_layers_per_stack); the per-layer lists follow the total, a hybrid keeps an attention layer
  (its list of attention-layer indices keeps one in range; a pattern of linear attention only ends in
  full attention), a default_X is the first of the config's Xs, a token id at the vocabulary's end
  or past it (as a sum of counts) keeps its place, a convolution's groups that were the hidden size
  stay it, a sub-config's width that was another sub-config's hidden size stays it, and a chunk of
  audio samples that was a multiple of a sub-config's hop is kept;
- `twice`: the same with each kind of layer twice, the kinds in order and then again (a layer that
  shares its weights or reads its cache from an earlier one of its kind has one: num_kv_shared_layers
  is the second half); per-layer settings keyed by layer index follow the layers kept;
- `keep_layers`: the same with the config's own layer counts and per-layer lists (layer indices,
  per-layer settings and patterns keep their meaning);
- `own_ids`: the smallest form with the config's own special token ids where they are in the
  vocabulary (ProphetNet's positions start after its pad id, 0)."""

from __future__ import annotations

import itertools
import math
import re

# Field-name roles, matched against the whole name (lower case). Layers first: `num_hidden_layers`
# is a count of layers, not a width.
LAYERS = re.compile(
    r"(num_hidden_layers|num_layers|n_layers?|.*_layers|.*layers_per_.*|num_blocks|n_blocks?|depth|decoder_layers|encoder_layers)"
)
KV_HEADS = re.compile(r"(num_key_value_heads|num_kv_heads|n_kv_heads?|.*_key_value_heads|multi_query_group_num|num_kv_groups?)")
HEADS = re.compile(r"(num_attention_heads|num_heads|n_heads?|.*_attention_heads|.*_num_heads|attention_heads)")
HEAD_DIM = re.compile(r"(head_dim|.*_head_dim|attention_head_size|kv_channels|d_kv|head_size|attn_head_size)")
LORA = re.compile(r"(kv_lora_rank|q_lora_rank|.*_lora_rank)")
HIDDEN = re.compile(r"(hidden_size|d_model|n_embd|n_embed|embed_dim|model_dim|dim|word_embed_proj_dim|embedding_size|hidden_dim)")
FFN = re.compile(r"(intermediate_size|.*_intermediate_size|ffn_dim|.*_ffn_dim|d_ff|n_inner|ffn_hidden_size|inner_dim|ff_dim|.*ffn_size)")
POSITIONS = re.compile(
    r"(max_position_embeddings|n_positions|n_ctx|max_seq_len|max_sequence_length|seq_length|max_length|max_target_positions)"
)
EXPERTS = re.compile(r"(num_experts|n_routed_experts|num_local_experts|moe_num_experts|n_experts|num_experts_total)")
TOPK = re.compile(r"(num_experts_per_tok|num_experts_per_token|moe_topk|top_k|moe_k|num_selected_experts|experts_per_token)")
GROUPS = re.compile(r"(n_group|topk_group|num_expert_groups?|n_shared_experts|num_shared_experts)")
ROTARY = re.compile(r"(rotary_dim|rotary_emb_dim|rope_dim)")
# A codec's first convolution's channels, doubled at each of its down-sampling stages (Mimi's, VibeVoice's
# tokenizers': 32 doubled six times is 2048 channels): small, so that its widest stage stays small too.
FILTERS = re.compile(r"(num_filters|n_filters)")
PERIOD = re.compile(r".*_period")
OFFSET = re.compile(r".*_offset")
WIDTH = re.compile(r".*(size|dim|rank|channels|width)$")
# The width of a speech model's input features, as its feature extractor makes them: kept.
FEATURES = re.compile(r"(num_mel_bins|n_mel_bins|n_mels|input_feat_size|input_dim|feature_projection_input_dim)")
# Roles only the consistent shrink gives: heads and head widths under a prefix (mamba_n_heads,
# mamba_d_head, n_mamba_heads, mamba_headdim).
MORE_HEADS = re.compile(r"(.*_n_heads|n_.*_heads)")
MORE_HEAD_DIM = re.compile(r"(d_head|.*_d_head|.*_headdim)")
HEAD_GROUPS = re.compile(r"(n_groups|.*_n_groups|.*_ngroups|num_groups)")  # groups of heads: a divisor of the heads
CONV_GROUPS = re.compile(r".*_groups")  # a convolution's groups (upsample_groups): one per channel where it was
KV_SHARED = re.compile(r".*kv_shared_layers")  # the last layers, which read the caches of earlier ones of their kind
# Lists of the indices of a hybrid's attention layers (attn_layer_indices, full_attn_idxs, hybrid_layer_ids).
ATTENTION_LAYERS = re.compile(r"(attn|attention|full_attn|full_attention|hybrid)_(layer_)?(indices|ids|idxs?)")

SIZES = dict(layers=2, heads=4, head_dim=8, hidden=32, ffn=64, positions=128, experts=4, topk=2, lora=16, width=16, filters=4)
# what the walk tries, in order
SHRINKS = ({}, {"consistent": True}, {"consistent": True, "twice": True}, {"consistent": True, "keep_layers": True}, {"own_ids": True})


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _now(config, k: str):
    """A field's value now, the global one where per-layer settings override it (config.k would refuse)."""
    return config.__dict__[k] if k in config.__dict__ else getattr(config, k)


def _shrink_int(name: str, value: int, orig: dict) -> int | None:
    """The small value of an int field by its name's role, or None to keep it."""
    n = name.lower()
    if n in ("num_labels", "pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id", "cls_token_id"):
        return None
    if n.endswith("_token_id") or n.endswith("_id"):
        return None
    if "vocab_size" in n:
        return None  # set from the tokenizer
    if FEATURES.fullmatch(n):
        return None
    if ROTARY.fullmatch(n):
        return SIZES["head_dim"] // 2 if value > 0 else value
    if FILTERS.fullmatch(n):
        return min(value, SIZES["filters"]) if value > 0 else value
    if PERIOD.fullmatch(n):  # every other layer (of two): a hybrid keeps both kinds
        return 2 if value > 2 else value
    if OFFSET.fullmatch(n):
        return 1 if value > 1 else value
    if LAYERS.fullmatch(n):
        return min(value, SIZES["layers"]) if value > 0 else value
    if KV_HEADS.fullmatch(n):
        heads = next((v for k, v in orig.items() if HEADS.fullmatch(k.lower()) and isinstance(v, int) and v > 0), None)
        if value <= 1:
            return value  # multi-query: one KV head stays one
        if heads is not None and value >= heads:
            return SIZES["heads"]
        return SIZES["heads"] // 2
    if HEADS.fullmatch(n):
        return min(value, SIZES["heads"]) if value > 0 else value
    if LORA.fullmatch(n):
        return SIZES["lora"] + (8 if n.startswith("q") else 0) if value > 0 else value
    if HEAD_DIM.fullmatch(n):
        return SIZES["head_dim"] if value > 0 else value
    if FFN.fullmatch(n):
        return SIZES["ffn"] if value > SIZES["ffn"] else value
    if HIDDEN.fullmatch(n):
        return SIZES["hidden"] if value > SIZES["hidden"] else value
    if POSITIONS.fullmatch(n):
        return SIZES["positions"] if value > SIZES["positions"] else value
    if EXPERTS.fullmatch(n):
        return min(value, SIZES["experts"]) if value > 0 else value
    if TOPK.fullmatch(n):
        return min(value, SIZES["topk"]) if value > 0 else value
    if GROUPS.fullmatch(n):
        return min(value, 1) if value > 0 else value
    if WIDTH.fullmatch(n) and value > 64:
        if value == orig.get("hidden_size"):  # a width the model adds to or concatenates with its hidden states
            return SIZES["hidden"]
        return SIZES["width"]
    return None


def _shrink_layer_list(values: list, layers: int, twice: bool = False) -> list[int]:
    """Which layers a per-layer list (layer_types, block types) cut to `layers` entries keeps, by index:
    every distinct kind the model mixes, in their first order (a hybrid keeps an attention layer and a
    recurrent one), then the next layers; `twice`: each kind's first two layers, the kinds in order
    and then again."""
    first = {}
    for i, v in enumerate(values):
        first.setdefault(str(v), []).append(i)
    if twice:
        return [i[0] for i in first.values()] + [i[1] if len(i) > 1 else i[0] for i in first.values()]
    out = [i[0] for i in first.values()][:layers]
    while len(out) < min(layers, len(values)):
        out.append(len(out))
    return out


def shrink(
    config,
    vocab_size: int,
    token_ids: dict | None = None,
    consistent: bool = False,
    twice: bool = False,
    keep_layers: bool = False,
    own_ids: bool = False,
) -> None:
    """Make a transformers config tiny in place, by the roles of its fields' names; sub-configs too.
    `token_ids`: the special tokens' ids ({"bos_token_id": 0, ...}) set where the config has them.
    `consistent`, `twice`, `keep_layers`, `own_ids`: the module's docstring (SHRINKS)."""
    from transformers import PretrainedConfig

    d = dict(config.__dict__)
    subs = {k: dict(v.__dict__) for k, v in d.items() if isinstance(v, PretrainedConfig)}  # the sub-configs before
    layer_lists = {}
    if not keep_layers:
        layer_lists = {
            k: v
            for k, v in d.items()
            if isinstance(v, list) and len(v) > 2 and k.endswith(("layer_types", "_types", "block_types", "layers_block_type"))
        }
    layers = kept = None
    for k, v in layer_lists.items():
        kept = _shrink_layer_list(v, max(SIZES["layers"], len(set(map(str, v)))), twice)
        new = [v[i] for i in kept]
        if consistent and len(new) > 1 and set(new) == {"linear_attention"}:
            new[-1] = "full_attention"  # a hybrid keeps an attention layer, as its checkpoints have (a cache measures its length by one)
        setattr(config, k, new)
        layers = len(new)
    spec = d.get("_heterogeneity_spec")  # transformers' per-layer settings (per_layer_config): they follow the layers kept
    if kept is not None and spec is not None:
        spec.per_layer_overrides = {n: spec.per_layer_overrides[j] for n, j in enumerate(kept) if j in spec.per_layer_overrides}
    for k, v in d.items():
        if isinstance(v, PretrainedConfig):
            shrink(v, vocab_size, token_ids, consistent, twice, keep_layers, own_ids)
            continue
        if not _is_int(v):
            continue
        if keep_layers and LAYERS.fullmatch(k.lower()):
            continue
        new = _shrink_int(k, v, d)
        if consistent and new is None and v > 0 and MORE_HEADS.fullmatch(k.lower()):
            new = min(v, SIZES["heads"])
        if consistent and v > 0 and HEAD_GROUPS.fullmatch(k.lower()):
            new = math.gcd(v, SIZES["heads"])
        if layers is not None and LAYERS.fullmatch(k.lower()) and v > 0:
            new = layers
            if twice and KV_SHARED.fullmatch(k.lower()) and v < d.get("num_hidden_layers", 0):
                new = layers // 2  # the second of each kind reads the first's cache
        if new is not None and new != v:
            setattr(config, k, new)
    for k, v in d.items():
        if "vocab_size" in k and _is_int(v) and v > 0:
            setattr(config, k, vocab_size)
    _keep_sums(config, d, HEAD_DIM)
    if consistent:
        _fill_none(config, d)
        _keep_head_products(config, d)
        _keep_width_ratios(config, d)
        _keep_token_ids(config, d)
        _keep_shared_widths(config, subs)
        _keep_sample_counts(config, d, subs)
        if not keep_layers:
            _keep_sums(config, d, LAYERS, terms=3)
            _keep_stacks(config, d)
            _keep_attention_layers(config, d)
            n = getattr(config, "num_hidden_layers", None)
            for k, v in layer_lists.items():  # a total that follows its parts: the per-layer lists follow it
                if _is_int(n) and len(getattr(config, k)) < n <= len(v):
                    kept = _shrink_layer_list(v, n)
                    setattr(config, k, [v[i] for i in kept])
    for over in spec.per_layer_overrides.values() if spec is not None else ():  # per-layer settings shrink as the global ones
        for k, v in over.items():
            if _is_int(v) and _is_int(d.get(k)) and v > 0 and d[k] > 0:
                new = v // d[k] * _now(config, k) if v % d[k] == 0 else _shrink_int(k, v, {**d, **over})  # a multiple stays one
                over[k] = v if new is None else new
    for k, v in (token_ids or {}).items():
        if k in d and not (own_ids and _is_int(d[k]) and 0 <= d[k] < vocab_size):
            setattr(config, k, v)
    if "is_decoder" in d:  # the encoder families registered as causal LMs (BERT, RoBERTa) generate as decoders
        config.is_decoder = True
    if keep_layers:
        return
    counts = [k for k, v in d.items() if LAYERS.fullmatch(k.lower()) and _is_int(v)]  # num_hidden_layers first
    counts.sort(key=lambda k: k != "num_hidden_layers")
    for k, v in d.items():  # per-layer lists whose length follows a number of layers (conv_dim: num_feat_extract_layers)
        if k in layer_lists or not isinstance(v, (list, tuple)) or not v or len(v) <= SIZES["layers"]:
            continue
        n = next((getattr(config, c) for c in counts if d[c] == len(v)), None)
        if _is_int(n):
            setattr(config, k, v[:n])


def _keep_sums(config, before: dict, role: re.Pattern, terms: int = 2) -> None:
    """A field of `role` that was the sum of two (or up to `terms`) others of its role stays their sum:
    MLA's qk_head_dim = qk_nope_head_dim + qk_rope_head_dim; layer counts by part that sum to the total."""
    fields = {k: v for k, v in before.items() if role.fullmatch(k.lower()) and _is_int(v) and v > 0}
    for k, v in fields.items():
        others = sorted(set(fields) - {k})
        for r in range(2, terms + 1):
            part = next((c for c in itertools.combinations(others, r) if sum(fields[a] for a in c) == v), None)
            if part is not None:
                setattr(config, k, sum(_now(config, a) for a in part))
                break


def _hidden(config, before: dict) -> tuple[str, int, int] | None:
    """The config's hidden width: (field, value before, value now)."""
    k = next((k for k, v in before.items() if HIDDEN.fullmatch(k.lower()) and _is_int(v) and v > 0), None)
    return None if k is None else (k, before[k], _now(config, k))


def _fill_none(config, before: dict) -> None:
    """The sizes a config leaves None for its checkpoints to set, by role: a head width from the hidden
    size and the heads, KV heads as many as the heads, experts, top-k and groups; and a default_X the
    first of the config's Xs."""
    hidden = _hidden(config, before)
    heads = next((_now(config, k) for k, v in before.items() if HEADS.fullmatch(k.lower()) and _is_int(v) and v > 0), None)
    for k, v in before.items():
        n = k.lower()
        if v is not None or n.endswith("_id"):
            continue
        options = before.get(n.removeprefix("default_") + "s")
        if n.startswith("default_") and isinstance(options, (list, tuple)) and options:
            setattr(config, k, options[0])  # a default one of the listed (default_language of languages)
        elif HEAD_DIM.fullmatch(n) and hidden and heads:
            setattr(config, k, hidden[2] // heads)
        elif KV_HEADS.fullmatch(n) and heads:
            setattr(config, k, heads)
        elif HEADS.fullmatch(n):
            setattr(config, k, SIZES["heads"])
        elif EXPERTS.fullmatch(n):
            setattr(config, k, SIZES["experts"])
        elif TOPK.fullmatch(n):
            setattr(config, k, SIZES["topk"])
        elif GROUPS.fullmatch(n):
            setattr(config, k, 1)


def _prefix(name: str) -> str:
    """What a heads or head-width field's name says besides its role: mamba_headdim, n_mamba_heads and
    mamba_d_head all say mamba; num_attention_heads and head_dim say nothing."""
    role = {"num", "n", "d", "attention", "head", "heads", "dim", "headdim", "size"}
    return "_".join(w for w in name.lower().split("_") if w and w not in role)


def _keep_stacks(config, before: dict) -> None:
    """A total layer count that was a whole multiple of a count of layers per part (num_layers_per_stack)
    stays that multiple."""
    n = before.get("num_hidden_layers")
    for k, v in before.items():
        if "layers_per_" in k.lower() and LAYERS.fullmatch(k.lower()) and _is_int(v) and v > 0 and _is_int(n) and n % v == 0:
            config.num_hidden_layers = n // v * _now(config, k)


def _keep_attention_layers(config, before: dict) -> None:
    """A hybrid's list of attention-layer indices keeps the indices below the shrunk layer count, and
    keeps one (the last layer) where it kept none or the config left it None."""
    n = getattr(config, "num_hidden_layers", None)
    if not _is_int(n) or n < 2:
        return
    for k, v in before.items():
        if not ATTENTION_LAYERS.fullmatch(k.lower()) or not (v is None or isinstance(v, (list, tuple))):
            continue
        kept = [i for i in v or [] if _is_int(i) and 0 <= i < n]
        setattr(config, k, kept or [n - 1])


def _keep_head_products(config, before: dict) -> None:
    """A head width whose product with its heads was a whole multiple of the hidden size keeps that
    multiple (hidden_size * expand = num_heads * head_dim); its heads are the heads field with the
    same prefix (mamba_d_head with mamba_n_heads), else the attention heads."""
    hidden = _hidden(config, before)
    if hidden is None:
        return
    heads = [k for k, v in before.items() if (HEADS.fullmatch(k.lower()) or MORE_HEADS.fullmatch(k.lower())) and _is_int(v) and v > 0]
    for k, v in before.items():
        if not (HEAD_DIM.fullmatch(k.lower()) or MORE_HEAD_DIM.fullmatch(k.lower())) or not _is_int(v) or v <= 0:
            continue
        same = [h for h in heads if _prefix(h) == _prefix(k)] or [h for h in heads if not _prefix(h)]
        for h in same:
            if (v * before[h]) % hidden[1] == 0:
                width = v * before[h] // hidden[1] * hidden[2]
                if width % _now(config, h) == 0:
                    setattr(config, k, width // _now(config, h))
                break


def _keep_width_ratios(config, before: dict) -> None:
    """A width that was a whole multiple or a whole fraction of the hidden size stays one; a
    convolution's groups that were the hidden size (one per channel) stay it."""
    hidden = _hidden(config, before)
    if hidden is None:
        return
    k0, was, now = hidden
    for k, v in before.items():
        n = k.lower()
        if (
            k == k0
            or not _is_int(v)
            or v <= 0
            or not (HIDDEN.fullmatch(n) or FFN.fullmatch(n) or WIDTH.fullmatch(n) or CONV_GROUPS.fullmatch(n))
        ):
            continue
        if CONV_GROUPS.fullmatch(n) and v != was:
            continue  # a depthwise convolution's groups: one per channel
        if HEAD_DIM.fullmatch(n) or MORE_HEAD_DIM.fullmatch(n) or ROTARY.fullmatch(n):
            continue
        if LAYERS.fullmatch(n) or HEADS.fullmatch(n) or POSITIONS.fullmatch(n) or FEATURES.fullmatch(n) or "vocab" in n:
            continue
        if v % was == 0:
            setattr(config, k, v // was * now)
        elif was % v == 0 and now % (was // v) == 0:
            setattr(config, k, now // (was // v))


def _keep_token_ids(config, before: dict) -> None:
    """A token id that was the vocabulary's last (a CTC blank) stays its last; one past the vocabulary
    that was a count plus a product of two (the rows after the text vocabulary: vocab_size +
    num_codebooks * codebook_vocab_size) stays that sum."""
    vocab = before.get("vocab_size")
    ints = {k: v for k, v in before.items() if _is_int(v) and v > 0 and not k.endswith("_id")}
    for k, v in before.items():
        if k.endswith("_token_id") and _is_int(v) and _is_int(vocab) and v == vocab - 1:
            setattr(config, k, config.vocab_size - 1)
        if not (k.endswith("_token_id") and _is_int(v) and _is_int(vocab) and v >= vocab):
            continue
        sums = [(a, b, c) for a in ints for b, c in itertools.combinations(ints, 2) if a not in (b, c)]
        sums = [t for t in sums if ints[t[0]] + ints[t[1]] * ints[t[2]] == v]
        roles = (HEADS, KV_HEADS, LAYERS, HIDDEN, FFN, HEAD_DIM, WIDTH)  # fewest sizes of a role: counts of codebooks, not heads
        part = min(sums, key=lambda t: sum(any(r.fullmatch(f.lower()) for r in roles) for f in t), default=None)
        if part is not None:
            a, b, c = part
            setattr(config, k, _now(config, a) + _now(config, b) * _now(config, c))


def _keep_shared_widths(config, subs: dict) -> None:
    """A width in one sub-config that was another sub-config's hidden size stays it (a diffusion head's
    latent_size, a head's audio_hidden_size: audio_config.hidden_size); where several were, the one
    its name's prefix names (audio_ for audio_config)."""
    hidden = {}
    for k, before in subs.items():
        h = _hidden(getattr(config, k), before)
        if h is not None:
            hidden[k] = h
    for k, before in subs.items():
        sub = getattr(config, k)
        own = hidden.get(k, (None,))[0]
        for f, v in before.items():
            n = f.lower()
            if f == own or not _is_int(v) or not (HIDDEN.fullmatch(n) or WIDTH.fullmatch(n)) or HEAD_DIM.fullmatch(n):
                continue
            same = [o for o, h in hidden.items() if o != k and h[1] == v]
            named = [o for o in same if n.startswith(o.removesuffix("_config") + "_")]
            now = {hidden[o][2] for o in named or same}
            if len(now) == 1:
                setattr(sub, f, now.pop())


def _keep_sample_counts(config, before: dict, subs: dict) -> None:
    """A chunk of audio samples (a *chunk_size, *samples) that was a whole multiple of a sub-config's
    hop (the product of its down-sampling ratios or strides) is kept."""
    hops = {
        math.prod(v)
        for sub in subs.values()
        for k, v in sub.items()
        if re.fullmatch(r".*(ratios|strides?)", k) and isinstance(v, (list, tuple)) and len(v) > 1 and all(map(_is_int, v))
    }
    for k, v in before.items():
        if re.fullmatch(r".*(chunk_size|samples)", k) and _is_int(v) and _now(config, k) != v and any(h > 1 and v % h == 0 for h in hops):
            setattr(config, k, v)
