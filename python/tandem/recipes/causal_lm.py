"""The causal-LM recipe for Hugging Face transformers models (imports transformers only when called).

    program = tandem.transformers.export_causal_lm(model, max_cache_len=512, max_prompt_len=64)

A decoder-only LM becomes one program whose state is its static KV cache (transformers'
StaticCache, exported as it is: the cache object's tensors are state):
- `prefill(tokens [1, n])`, 1 <= n <= max_prompt_len (a dynamic dim 'n'): appends n tokens to the
  cache and returns the last position's logits [1, vocab]; each call runs at its own length;
- `decode(token [1, 1])`: appends one token, returns its logits [1, vocab];
- `decode_topk(token [1, 1])`: appends one token like decode (same state), returns its K largest
  logits, values float32 [1, K] and their token ids int64 [1, K], largest first, equal values by
  the lower id (the runtime's `topk`), so sampling reads K numbers instead of the vocabulary;
- `reset()`: empties the cache.
The position lives in state: callers never pass it. A call that would write past max_cache_len
fails with TDM_ERR_INDEX and leaves the state unchanged.

Metadata (`model.metadata`; `metadata=` adds entries): model_type, vocab_size, num_layers,
max_cache_len (None for Mamba), max_prompt_len, sample_top_k (K of decode_topk; absent with
sample_top_k=None), position_state (the state tensor holding the number of positions in use),
bos_token_id, eos_token_id, and unused_options (the arguments given that do not apply to the model,
e.g. a Mamba LM's max_cache_len) when there are any.

A causal LM whose own cache has recurrent layers (the StaticCache transformers builds from its config
holds LinearAttentionLayers: Mamba2, FalconMamba, hybrids beside attention layers, ...) is run one
token per step of its own forward (RecurrentLM). A Mamba LM (MambaForCausalLM) goes through the same
recipe; its state is each layer's convolution window and SSM state (no KV cache: any length fits, so
max_cache_len is None), plus a count of the tokens seen (position_state). Both have the same methods
as above: a recurrent update steps through the tokens one by one, a loop that a fixed graph cannot
run a dynamic n times, so their `prefill` runs max_prompt_len one-token steps whatever n is, and
undoes the steps past the n-th (prefill_steps): any n from 1 to max_prompt_len in one method, at
the cost of max_prompt_len steps per call. A model whose forward takes its past as an argument and
gives it back under the same name (RWKV's `state`) is run the same way, the argument's tensors its
program state (StateArgumentLM, state_argument.py).

A model whose forward takes no transformers Cache nor such an argument (GPT-1 keeps no past), or whose
cache path does not export, is run with no cache (UncachedLM, uncached.py): its state is the token ids
seen so far in a buffer of max_cache_len, each call a full forward over the buffer, the same methods;
the metadata entry `uncached` says why. It is checked to be causal first (NotCausal otherwise).
"""

from __future__ import annotations

import contextlib
import inspect

import torch
from torch import nn

from ..decoding import prefill  # noqa: F401  (tandem.transformers.prefill, pretrained.py)
from ..export import Method, export
from ..ir import ExportError
from ..program import Program
from .adapters import adapted
from .checks import ArgumentError, check_int, check_options, token_id
from .state_argument import StateArgumentLM, TokenSteps, state_argument
from .uncached import NotCausal, UncachedLM, check_causal


class CausalLM(nn.Module):
    """A decoder-only LM with its StaticCache: prefill/decode append to the cache, reset empties it.
    Each layer's keys and values are sized from what the model writes there, by one eager call of
    one token (then emptied): a multi-query layer's one KV head, a latent-attention layer's keys and
    values of other widths than the config's head_dim, whatever the config's head counts say.
    Each call gives the model what transformers' generate gives it over a static cache, computed from
    the cache length in the state: the attention mask [1, max_cache_len] (1 for the positions written
    and being written, the padding generate adds up to the cache's length), and to a forward that takes
    them the positions 0, 1, ... So a model that would build its mask from the cache length
    (`torch.ones(past + n)`) or count its positions from it (a slice of a position table from `past`,
    a cumulative sum of the mask) is given both, and no size depends on a value in the state. A causal
    table the model slices from its keys' length holds the rows of the positions written (_causal_tables),
    and a module whose own code cannot be traced runs its adapter (adapters.py)."""

    def __init__(self, model: nn.Module, max_cache_len: int):
        super().__init__()
        from transformers import StaticCache, cache_utils
        from transformers.cache_utils import StaticLayer

        self.model = model
        self.max_cache_len = max_cache_len
        config = model.config.get_text_config(decoder=True)
        self.cache = StaticCache(config=config, max_cache_len=max_cache_len)
        # a static layer with a cache of its own beside its keys and values (DeepSeek sparse attention's
        # indexer keys) stays as it is
        kept = (StaticLayer, getattr(cache_utils, "StaticIndexedLayer", StaticLayer))
        for i, layer in enumerate(self.cache.layers):
            if type(layer) not in kept:  # sliding-window and shared-KV layers: a plain static layer
                self.cache.layers[i] = StaticLayer(max_cache_len)
        with torch.no_grad():  # transformers' StaticLayer takes its shapes from the first keys and values written
            try:
                model(input_ids=torch.zeros(1, 1, dtype=torch.long), cache=self.cache, use_cache=True, logits_to_keep=1)
            except IndexError as e:  # index_copy_ past the cache's end
                raise _more_positions_than_tokens(model, f"past the cache's {max_cache_len} positions ({e})") from e
        # a layer the model never writes (one that reads another layer's keys and values) keeps no tensors
        self.written = [layer for layer in self.cache.layers if getattr(layer, "keys", None) is not None]
        self.positions = "position_ids" in inspect.signature(model.forward).parameters
        self.tables = _causal_tables(model, max_cache_len)
        self.reset()

    def step(self, tokens: torch.Tensor, **inputs) -> torch.Tensor:
        kwargs = dict(inputs)  # more of the forward's inputs (an audio LM's audio, audio_lm.py)
        if self.written:  # the mask and positions transformers' generate gives, from the cache length
            start = self.written[0].cumulative_length.reshape(1, 1)
            kwargs["attention_mask"] = (torch.arange(self.max_cache_len).reshape(1, -1) < start + tokens.shape[1]).long()
            if self.positions:
                kwargs["position_ids"] = start + torch.arange(tokens.shape[1]).reshape(1, -1)
            tables = _tables_at(self.tables, start, tokens.shape[1], self.max_cache_len)
        else:
            tables = contextlib.nullcontext()
        with tables, adapted(self.model):
            out = self.model(input_ids=tokens, cache=self.cache, use_cache=True, logits_to_keep=1, **kwargs)
        return out.logits[:, -1]

    def step_topk(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _topk(self.step(tokens), self.top_k)

    def reset(self) -> None:
        for layer in self.written:  # keys, values, their length, and any cache of the layer's own with its length
            for t in vars(layer).values():
                if isinstance(t, torch.Tensor):
                    t.zero_()


def _more_positions_than_tokens(model: nn.Module, what: str) -> ExportError:
    """The refusal of a model whose one token writes other than one position into its cache."""
    return ExportError(
        f"{type(model).__name__}: one token written into its cache writes {what}: the model puts positions of its "
        "own in its cache beside the tokens it is given (CPM-Ant: its prompt, ahead of them on every call), so a "
        "static cache of max_cache_len positions cannot hold its past"
    )


def _causal_tables(model: nn.Module, max_cache_len: int) -> list:
    """[(module, buffer name, table)] of the causal tables a model's attention slices by its keys' length:
    a bool buffer [1, 1, P, P] (P >= max_cache_len) whose row r says which keys position r sees (lower
    triangular; banded for a local window: GPT-Neo, ImageGPT, Bark), read as
    `table[:, :, key_length - query_length : key_length, :key_length]`, rows that are the queries'
    positions only where the keys are the past and the new tokens (a dynamic cache)."""
    out = []
    for module in model.modules():
        for name, t in module.named_buffers(recurse=False):
            if t.dtype == torch.bool and t.dim() == 4 and t.shape[:2] == (1, 1) and t.shape[2] == t.shape[3] >= max_cache_len:
                if torch.equal(t, torch.tril(t)):
                    out.append((module, name, t))
    return out


@contextlib.contextmanager
def _tables_at(tables: list, start: torch.Tensor, n: int, max_cache_len: int):
    """Within the block each causal table (_causal_tables) holds at rows [max_cache_len - n, max_cache_len) the
    rows of the positions being written, start .. start + n - 1, over the cache's max_cache_len keys: the rows a
    slice from the static cache's length reads; then the model's own tables again."""
    rows = (torch.arange(max_cache_len) - (max_cache_len - n) + start.reshape(())).clamp(min=0)
    try:
        for module, name, t in tables:
            setattr(module, name, t[:, :, :, :max_cache_len].index_select(2, rows.clamp(max=t.shape[2] - 1)))
        yield
    finally:
        for module, name, t in tables:
            setattr(module, name, t)


def _topk(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest logits [1, k] and their ids [1, k], largest first. tandem's topk orders equal
    values by the lower id (eager PyTorch leaves their order unspecified)."""
    values, ids = torch.topk(logits, k, dim=-1)
    return values, ids


class _MambaLayerState(nn.Module):
    def __init__(self, channels: int, kernel: int, state_size: int):
        super().__init__()
        self.register_buffer("conv", torch.zeros(1, channels, kernel - 1))  # the last kernel-1 inputs of the conv
        self.register_buffer("ssm", torch.zeros(1, channels, state_size))


class MambaLM(nn.Module):
    """A Mamba LM (transformers MambaForCausalLM) with its recurrent state as buffers: a step of n
    tokens continues from the state, so n tokens in any chunks equal them in one call (transformers'
    own prefill starts the SSM from zero, so it cannot continue a sequence). The math is transformers'
    slow path (MambaMixer without kernels), on the model's own modules and weights."""

    def __init__(self, model: nn.Module, max_cache_len: int | None = None):
        super().__init__()  # max_cache_len: taken like CausalLM's; a Mamba state has no length
        self.model = model
        c = model.config
        self.states = nn.ModuleList(_MambaLayerState(c.intermediate_size, c.conv_kernel, c.state_size) for _ in range(c.num_hidden_layers))
        self.register_buffer("position", torch.zeros((), dtype=torch.long))  # tokens seen since reset

    def _mixer(self, mixer: nn.Module, state: _MambaLayerState, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        h, gate = mixer.in_proj(x).transpose(1, 2).chunk(2, dim=1)  # [1, channels, n] each
        window = torch.cat([state.conv, h], dim=-1)
        state.conv.copy_(window[:, :, n:])
        h = nn.functional.conv1d(window, mixer.conv1d.weight, mixer.conv1d.bias, groups=mixer.intermediate_size)
        h = mixer.act(h)  # [1, channels, n]
        dt, B, C = torch.split(mixer.x_proj(h.transpose(1, 2)), [mixer.time_step_rank, mixer.ssm_state_size, mixer.ssm_state_size], dim=-1)
        dt = mixer.dt_proj.weight @ dt.transpose(1, 2)
        if mixer.dt_proj.bias is not None:
            dt = dt + mixer.dt_proj.bias[:, None]
        dt = nn.functional.softplus(dt)  # [1, channels, n]
        A = -torch.exp(mixer.A_log.float())  # [channels, state_size]
        dA = torch.exp(A[None, :, None, :] * dt[:, :, :, None])  # [1, channels, n, state_size]
        dBx = dt[:, :, :, None] * B[:, None, :, :] * h[:, :, :, None]
        ssm, ys = state.ssm, []
        for t in range(n):
            ssm = dA[:, :, t] * ssm + dBx[:, :, t]
            ys.append(torch.matmul(ssm, C[:, t, :, None])[:, :, 0])
        state.ssm.copy_(ssm)
        y = (torch.stack(ys, dim=-1) + h * mixer.D[None, :, None]) * nn.functional.silu(gate)
        return mixer.out_proj(y.transpose(1, 2))

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        backbone = self.model.backbone
        x = backbone.embeddings(tokens)
        for block, state in zip(backbone.layers, self.states):
            residual = x.float() if block.residual_in_fp32 else x
            x = residual + self._mixer(block.mixer, state, block.norm(x))
        self.position.add_(tokens.shape[1])
        return self.model.lm_head(backbone.norm_f(x[:, -1:]))[:, -1]

    def step_topk(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _topk(self.step(tokens), self.top_k)

    def kept_state(self) -> list:
        """The tensors a step changes (prefill_steps undoes a step past the prompt on them)."""
        return [t for state in self.states for t in (state.conv, state.ssm)] + [self.position]

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        return prefill_steps(self, tokens)

    def reset(self) -> None:
        for state in self.states:
            state.conv.zero_()
            state.ssm.zero_()
        self.position.zero_()


# ---- recurrent LMs over transformers' own cache classes -----------------------------------------


class _StateSlots:
    """Stands in for a LinearAttentionLayer's {state index: tensor} dict with the tensors as attributes
    (s0, s1, ...), so tandem.export finds them as state (it follows objects' attributes, not dict items)."""

    def __init__(self, tensors: dict):
        self._keys = sorted(tensors)
        for k in self._keys:
            setattr(self, f"s{k}", tensors[k])

    def __getitem__(self, k):
        return getattr(self, f"s{k}", None)

    def __setitem__(self, k, v):
        if k not in self._keys:
            self._keys.append(k)
        setattr(self, f"s{k}", v)

    def keys(self):
        return list(self._keys)

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def values(self):
        return [self[k] for k in self._keys]

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)


def _cache_layer_kinds(model, max_cache_len: int) -> tuple:
    """(the StaticCache transformers builds from the model's config, [kind of each layer]): 'recurrent'
    for a LinearAttentionLayer (conv/recurrent state tensors), 'attention' for a static KV layer, 'none'
    for a DummyLayer; an ExportError naming the model class and layer class for anything else."""
    from transformers import StaticCache
    from transformers.cache_utils import DummyLayer, LinearAttentionLayer, StaticLayer

    name = _class_name(model)
    config = getattr(model, "config", model).get_text_config(decoder=True)  # a model or its config
    try:
        cache = StaticCache(config=config, max_cache_len=max_cache_len)
    except Exception as e:
        raise ExportError(
            f"{name}: transformers cannot build a StaticCache from its config "
            f"({type(e).__name__}: {e}), so this recipe cannot give it a fixed-size state"
        ) from e
    kinds = []
    for i, layer in enumerate(cache.layers):
        if isinstance(layer, LinearAttentionLayer) and isinstance(layer, StaticLayer):
            kinds.append("hybrid")
        elif isinstance(layer, LinearAttentionLayer):
            kinds.append("recurrent")
        elif isinstance(layer, StaticLayer):
            kinds.append("attention")
        elif isinstance(layer, DummyLayer):
            kinds.append("none")
        else:
            raise ExportError(
                f"{name}: cache layer {i} is a {type(layer).__name__}, which this recipe "
                "cannot hold as fixed-size state (it exports static KV layers and linear-attention/"
                "recurrent layers)"
            )
    return cache, kinds


def _class_name(model) -> str:
    if isinstance(model, nn.Module):
        return type(model).__name__
    return ", ".join(getattr(model, "architectures", None) or []) or f"a {getattr(model, 'model_type', '?')} model"


def has_attention_layers(model) -> bool:
    """Whether a model (or config) whose cache has recurrent layers also has attention layers, which keep
    a KV cache of max_cache_len positions (a hybrid: Jamba, Bamba, Qwen3-Next, ...)."""
    _, kinds = _cache_layer_kinds(model, 8)
    return any(k in ("attention", "hybrid") for k in kinds)


def is_recurrent(model) -> bool:
    """Whether the model's (or a config's) own cache (transformers' StaticCache built from its config) holds recurrent
    state (LinearAttentionLayer: conv and SSM/recurrent tensors per layer) rather than only KV rows."""
    try:
        _, kinds = _cache_layer_kinds(model, 8)
    except ExportError:
        return False
    return any(k in ("recurrent", "hybrid") for k in kinds)


class RecurrentLM(TokenSteps):
    """A causal LM whose transformers cache has recurrent layers (Mamba2, FalconMamba, ...: each layer's
    convolution window and SSM state in a LinearAttentionLayer), run by the model's own forward one
    token at a time: a step of one token is transformers' own recurrent update, so a prefill of n
    tokens is n such steps (prefill_steps) and continues from the state, which transformers' own
    multi-token prefill (starting the scan from zero) would not. The cache is made by transformers
    (StaticCache from the config), its tensors created by one eager call and then zeroed; attention
    layers of a hybrid model keep a static KV cache of max_cache_len positions."""

    def __init__(self, model: nn.Module, cache, kinds: list, max_cache_len: int | None = None):
        super().__init__()
        from transformers.cache_utils import StaticLayer, StaticSlidingWindowLayer

        self.model = model
        self.kinds = kinds
        for i, layer in enumerate(cache.layers):
            if type(layer) is StaticSlidingWindowLayer:  # all max_cache_len positions: the model's mask keeps the window
                cache.layers[i] = StaticLayer(max_cache_len or layer.max_cache_len)
        self.cache = cache
        with torch.no_grad():  # transformers creates the state tensors lazily, at a first update
            model(input_ids=torch.zeros(1, 1, dtype=torch.long), cache=cache, use_cache=True)
            # state a model keeps in its modules' attributes rather than in the cache (RecurrentGemma's conv
            # window and recurrent state): the tensors a second call replaces or changes there (a table the
            # first call computed and kept, e.g. rotary sines, stays as it is), kept and zeroed by reset
            before = {key: (t, t.clone()) for key, t in _attribute_tensors(model).items()}
            model(input_ids=torch.ones(1, 1, dtype=torch.long), cache=cache, use_cache=True)
            self.held = [
                key
                for key, t in _attribute_tensors(model).items()
                if key not in before or before[key][0] is not t or not torch.equal(before[key][1], t)
            ]
        for i, layer in enumerate(cache.layers):
            if kinds[i] in ("recurrent", "hybrid"):
                for name in ("conv_states", "recurrent_states"):
                    got = {k: v for k, v in getattr(layer, name).items() if v is not None}
                    setattr(layer, name, _StateSlots(got))
                for k in layer.has_previous_state:  # every call continues the state (zero after reset)
                    layer.has_previous_state[k] = True
        self.register_buffer("position", torch.zeros((), dtype=torch.long))  # tokens seen since reset
        self.reset()

    def _one(self, token: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=token, cache=self.cache, use_cache=True, logits_to_keep=1)
        self.position.add_(1)
        return out.logits[:, -1]

    def kept_state(self) -> list:
        """The tensors a step changes but its attention layers' rows (prefill_steps undoes a step past the
        prompt on them): the recurrent state, each attention layer's length, the position."""
        out = []
        for i, layer in enumerate(self.cache.layers):
            if self.kinds[i] in ("recurrent", "hybrid"):
                out += list(layer.conv_states.values()) + list(layer.recurrent_states.values())
            if self.kinds[i] in ("attention", "hybrid") and getattr(layer, "keys", None) is not None:
                out.append(layer.cumulative_length)
        return out + self._held_tensors() + [self.position]

    def _held_tensors(self) -> list:
        modules = dict(self.model.named_modules())
        return [getattr(modules[path], name) for path, name in self.held]

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        return prefill_steps(self, tokens)

    def state_tensors(self) -> list:
        out = []
        for i, layer in enumerate(self.cache.layers):
            if self.kinds[i] in ("recurrent", "hybrid"):
                out += list(layer.conv_states.values()) + list(layer.recurrent_states.values())
            if self.kinds[i] in ("attention", "hybrid") and getattr(layer, "keys", None) is not None:
                out += [layer.keys, layer.values, layer.cumulative_length]
        return out + self._held_tensors()

    def reset(self) -> None:
        for t in self.state_tensors():
            t.zero_()
        self.position.zero_()


def _attribute_tensors(model: nn.Module) -> dict:
    """{(module path, attribute): tensor} of the tensors kept in the model's modules' plain attributes
    (not parameters or buffers)."""
    return {
        (path, name): v
        for path, module in model.named_modules()
        for name, v in vars(module).items()
        if isinstance(v, torch.Tensor) and not isinstance(v, nn.Parameter)
    }


def _attention_layers(lm) -> list:
    """The static KV layers of a recurrent LM's cache (a hybrid's attention layers)."""
    cache = getattr(lm, "cache", None)
    if cache is None:
        return []
    kinds = zip(cache.layers, lm.kinds)
    return [layer for layer, kind in kinds if kind in ("attention", "hybrid") and getattr(layer, "keys", None) is not None]


def prefill_steps(lm, tokens: torch.Tensor, step=None, count: int | None = None) -> torch.Tensor:
    """`prefill` of a recurrent LM: tokens [1, n], 1 <= n <= lm.max_prompt_len, as max_prompt_len
    one-token steps of lm.step (a fixed graph for every n); a step past the n-th runs on a padding token
    and is undone: lm.kept_state() (recurrent state, lengths, position) keeps its value from before the
    step, an attention layer writes that step's row at position 0 (in range however full the cache is)
    and gets its row back, and the logits are the n-th step's. `step` and `count` in place of lm.step and
    max_prompt_len: embeddings [1, n, width] by one position per step (audio_lm.py)."""
    n, count, step = tokens.shape[1], count or lm.max_prompt_len, step or lm.step
    steps = torch.arange(count)
    live = steps < n
    padded = tokens.index_select(1, torch.where(live, steps, 0))
    layers = _attention_layers(lm)
    logits = step(padded[:, :1])  # n >= 1: the first step always counts
    for t in range(1, count):
        on = live[t]
        before = [x.clone() for x in lm.kept_state()]
        rows = [(layer.keys[:, :, :1].clone(), layer.values[:, :, :1].clone()) for layer in layers]
        for layer in layers:  # a padding step writes its row at 0, not past the prompt's last
            layer.cumulative_length.copy_(torch.where(on, layer.cumulative_length, 0))
        out = step(padded[:, t : t + 1])
        for x, old in zip(lm.kept_state(), before):
            x.copy_(torch.where(on, x, old))
        for layer, (k, v) in zip(layers, rows):
            layer.keys[:, :, :1].copy_(torch.where(on, layer.keys[:, :, :1], k))
            layer.values[:, :, :1].copy_(torch.where(on, layer.values[:, :, :1], v))
        logits = torch.where(on, out, logits)
    return logits


class _StateArgumentLM(StateArgumentLM):
    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        return prefill_steps(self, tokens)


def _no_cache(model: nn.Module) -> str | None:
    """Why the model's forward keeps its past in something other than a transformers Cache (found from its
    forward's own parameters and their annotated classes: GPT-1 takes none, XLNet's `mems`, xLSTM's
    xLSTMCache), or None when it takes one."""
    import inspect
    import typing

    from transformers.cache_utils import Cache

    params = inspect.signature(model.forward).parameters
    key = next((k for k in ("cache", "past_key_values") if k in params), None)
    if key is None:
        own = [k for k in ("state", "cache_params", "mems") if k in params]
        return f"its forward takes no transformers Cache{' (it passes its state as ' + repr(own[0]) + ')' if own else ''}"
    annotation = params[key].annotation
    classes = [a for a in (typing.get_args(annotation) or (annotation,)) if isinstance(a, type) and a is not type(None)]
    foreign = [c for c in classes if not issubclass(c, Cache)]
    if foreign and not any(issubclass(c, Cache) for c in classes):
        return f"its forward's {key!r} is a {foreign[0].__name__}, not a transformers Cache"
    return None


def _recurrent_lm(model, max_cache_len, max_prompt_len) -> tuple:
    """export_causal_lm's family part for a model whose cache has recurrent layers (see RecurrentLM):
    (lm, its prefill methods, metadata entries, layers, position state)."""
    cache, kinds = _cache_layer_kinds(model, max_cache_len or 1)
    attention = [i for i, k in enumerate(kinds) if k in ("attention", "hybrid")]
    if attention and max_cache_len is None:
        raise ArgumentError(
            f"max_cache_len=None: {type(model).__name__} has attention layers ({', '.join(map(str, attention))}) "
            "beside its recurrent ones, and they keep a KV cache; pass the length you need, e.g. max_cache_len=512"
        )
    if max_prompt_len < 1 or (max_cache_len is not None and max_prompt_len > max_cache_len):
        raise ArgumentError(f"max_prompt_len must be in [1, {max_cache_len or 'any'}], got {max_prompt_len}")
    lm = _built(RecurrentLM, model, cache, kinds, max_cache_len)
    return lm, _steps_prefill(lm, max_prompt_len), {}, len(kinds), "position"


def _prefill(fn, max_prompt_len) -> dict:
    """{'prefill': fn over [1, n] token ids, n from 1 to max_prompt_len}."""
    example = min(max(max_prompt_len - 1, 2), max_prompt_len)  # not 1: torch.export would specialize the dim to it
    n = torch.export.Dim("n", min=1, max=max_prompt_len)
    return {"prefill": Method(fn, (torch.zeros(1, example, dtype=torch.long),), dynamic_shapes=({1: n},))}


def _steps_prefill(lm, max_prompt_len) -> dict:
    """{'prefill': ...} of 1 to max_prompt_len tokens run as max_prompt_len one-token steps (prefill_steps)."""
    lm.max_prompt_len = max_prompt_len
    if max_prompt_len == 1:
        return {"prefill": Method(lm.step, (torch.zeros(1, 1, dtype=torch.long),))}
    return _prefill(lm.prefill, max_prompt_len)


def _mamba_lm(model, config, max_cache_len, max_prompt_len) -> tuple:
    """export_causal_lm's family part for a MambaForCausalLM (see MambaLM), as _recurrent_lm's."""
    if max_prompt_len < 1:
        raise ArgumentError(f"max_prompt_len must be at least 1, got {max_prompt_len}")
    lm = MambaLM(model, max_cache_len)
    return lm, _steps_prefill(lm, max_prompt_len), {}, int(config.num_hidden_layers), "position"


def _kv_cache_lm(model, config, max_cache_len, max_prompt_len) -> tuple:
    """export_causal_lm's family part for an LM over a static KV cache (see CausalLM), as _recurrent_lm's."""
    if max_cache_len is None:
        raise ArgumentError(
            f"max_cache_len=None: a {getattr(config, 'model_type', '') or type(model).__name__} model keeps its past in a KV "
            "cache of max_cache_len positions; pass the length you need, e.g. max_cache_len=512"
        )
    if not 1 <= max_prompt_len <= max_cache_len:
        raise ArgumentError(f"max_prompt_len must be in [1, max_cache_len={max_cache_len}], got {max_prompt_len}")
    lm = _built(CausalLM, model, max_cache_len)
    prefills = _prefill(lm.step, max_prompt_len)
    return lm, prefills, {}, int(config.num_hidden_layers), "cache.layers.0.cumulative_length"


def _built(cls, model, *args):
    """cls(model, *args), whose eager calls over the model's own cache may fail: an ExportError saying so."""
    try:
        return cls(model, *args)
    except ExportError:
        raise
    except Exception as e:
        why = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        raise ExportError(f"{type(model).__name__}: its forward fails over the cache transformers builds for it ({why})") from e


def _uncached_lm(model, config, max_cache_len, max_prompt_len, why: str) -> tuple:
    """export_causal_lm's family part for a model whose cache cannot be exported (see UncachedLM: the
    token ids as state, a full forward per step), as _recurrent_lm's; NotCausal unless check_causal passes."""
    if max_cache_len is None:
        raise ArgumentError(
            f"max_cache_len=None: {type(model).__name__}: {why}, so tandem runs its forward with no cache over a buffer "
            "of max_cache_len token ids (the uncached recipe); pass the length you need, e.g. max_cache_len=512"
        )
    if not 1 <= max_prompt_len <= max_cache_len:
        raise ArgumentError(f"max_prompt_len must be in [1, max_cache_len={max_cache_len}], got {max_prompt_len}")
    lm = UncachedLM(model, max_cache_len)
    check_causal(lm, int(config.vocab_size), max_prompt_len)
    prefills = _prefill(lm.step, max_prompt_len)
    layers = getattr(config, "num_hidden_layers", None)
    return lm, prefills, {"uncached": why}, None if layers is None else int(layers), "position"


def export_causal_lm(
    model: nn.Module, max_cache_len: int | None, max_prompt_len: int, metadata: dict | None = None, sample_top_k: int | None = 64, **options
) -> Program:
    """Export a transformers decoder-only LM (e.g. LlamaForCausalLM, Qwen2, Gemma, Phi-3, GPT-2) as
    prefill (of 1 to max_prompt_len tokens), decode, decode_topk and reset over its static KV cache,
    or a recurrent LM (Mamba, Mamba2, ...: max_cache_len=None, no cache to fill) as the same methods
    over its recurrent state; see the module's docstring for the methods and
    the metadata. decode_topk returns the K = min(sample_top_k, vocab_size) largest logits and their
    ids (the JS generate() samples from them when it needs no more than K); sample_top_k=None: no
    decode_topk.
    A model whose forward takes no transformers Cache, or whose cache path does not export, is run
    with no cache over a buffer of max_cache_len token ids (the uncached recipe, uncached.py: the
    same methods, each step a full forward over max_cache_len positions), once it is found causal;
    the metadata entry `uncached` says why its cache was not used.
    Every family takes the same arguments: one that does not apply to the model (max_cache_len of a
    Mamba or Mamba2 LM, which has no KV cache) is accepted and recorded in the metadata entry
    `unused_options`; a hybrid's max_cache_len is its attention layers' capacity.
    `options` go to tandem.export, e.g. quantize="int8" | "int4", quantize_group, quantize_skip;
    any other name is an ExportError naming it."""
    check_options("export_causal_lm", options)
    model = model.eval().float()
    config = model.config.get_text_config(decoder=True)
    if sample_top_k is not None and (isinstance(sample_top_k, bool) or not isinstance(sample_top_k, int) or sample_top_k < 1):
        raise ExportError(f"sample_top_k must be a positive int (the K of decode_topk) or None (no decode_topk), got {sample_top_k!r}")
    check_int("max_prompt_len", max_prompt_len)
    if max_cache_len is not None:
        check_int("max_cache_len", max_cache_len)
    how = dict(metadata=metadata, sample_top_k=sample_top_k, **options)
    model_type = getattr(config, "model_type", "")
    argument = state_argument(model) if model_type != "mamba" else None
    why = _no_cache(model) if argument is None and model_type != "mamba" else None
    if why is None:
        try:
            return _export_lm(model, config, *_cached_lm(model, config, argument, max_cache_len, max_prompt_len), **how)
        except ArgumentError:
            raise
        except ExportError as e:
            if max_cache_len is None or _timed_out(e):  # the uncached recipe needs a capacity; a timeout is the caller's
                raise
            first = " ".join(str(e).split())
            why, cached = f"its cache path does not export ({first if len(first) <= 300 else first[:297] + '...'})", e
    else:
        cached = None
    try:
        parts = _uncached_lm(model, config, max_cache_len, max_prompt_len, why)
        return _export_lm(model, config, *parts, {}, max_cache_len, max_prompt_len, **how)
    except ArgumentError:
        raise
    except NotCausal as e:  # its message names the model
        raise NotCausal(f"{e}; and its own cache cannot be used: {why}") from cached or e
    except ExportError as e:
        name = type(model).__name__
        raise ExportError(f"{name}: the uncached recipe fails ({e}), and its own cache cannot be used: {why}") from cached or e


def _timed_out(e: BaseException) -> bool:
    """Whether a TimeoutError (a caller's deadline, e.g. an alarm) is among e's causes."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, TimeoutError):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _cached_lm(model, config, argument, max_cache_len, max_prompt_len) -> tuple:
    """The family part of a model that keeps its past in a transformers Cache or a forward argument:
    (lm, prefill methods, metadata entries, layers, position state, unused options, max_cache_len, max_prompt_len)."""
    model_type = getattr(config, "model_type", "")
    unused = {}
    if argument is not None:  # its past in a forward argument (RWKV's state): a fixed-size state, no KV cache
        if max_cache_len is not None:
            unused["max_cache_len"] = int(max_cache_len)
            max_cache_len = None
        if max_prompt_len < 1:
            raise ArgumentError(f"max_prompt_len must be at least 1, got {max_prompt_len}")
        lm = _StateArgumentLM(model, argument)
        parts = lm, _steps_prefill(lm, max_prompt_len), {}, int(config.num_hidden_layers), "position"
    elif model_type != "mamba" and is_recurrent(model):
        if max_cache_len is not None and not has_attention_layers(model):  # a fixed-size state: any number of tokens fits
            unused["max_cache_len"] = int(max_cache_len)
            max_cache_len = None
        parts = _recurrent_lm(model, max_cache_len, max_prompt_len)
    elif model_type == "mamba":
        if max_cache_len is not None:  # a fixed-size state, not a KV cache: any number of tokens fits
            unused["max_cache_len"] = int(max_cache_len)
            max_cache_len = None
        parts = _mamba_lm(model, config, max_cache_len, max_prompt_len)
    else:
        parts = _kv_cache_lm(model, config, max_cache_len, max_prompt_len)
    return (*parts, unused, max_cache_len, max_prompt_len)


def _export_lm(
    model, config, lm, methods, extra, num_layers, position_state, unused, max_cache_len, max_prompt_len, metadata, sample_top_k, **options
) -> Program:
    """The methods every family has, after its prefill, exported with the recipe's metadata."""
    top_k = None if sample_top_k is None else min(sample_top_k, int(config.vocab_size))
    methods["decode"] = Method(lm.step, (torch.zeros(1, 1, dtype=torch.long),))
    if top_k is not None:
        lm.top_k = top_k
        methods["decode_topk"] = Method(lm.step_topk, (torch.zeros(1, 1, dtype=torch.long),))
        extra["sample_top_k"] = top_k
    methods["reset"] = Method(lm.reset, ())
    return export(
        None,
        methods,
        metadata={
            "model_type": getattr(config, "model_type", ""),
            "vocab_size": int(config.vocab_size),
            "num_layers": num_layers,
            "max_cache_len": None if max_cache_len is None else int(max_cache_len),
            "max_prompt_len": int(max_prompt_len),
            **extra,
            "position_state": position_state,
            "bos_token_id": token_id(getattr(config, "bos_token_id", None)),
            "eos_token_id": token_id(getattr(config, "eos_token_id", None)),
            **({"unused_options": unused} if unused else {}),
            **(metadata or {}),
        },
        **options,
    )
