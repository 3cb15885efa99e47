"""ONNX exports of a streaming step with its state as explicit inputs and outputs, the route the community
ports of Kyutai's models to onnxruntime(-web) take (a wrapper module whose forward takes the state tensors
and returns the new ones, traced by torch.onnx's TorchScript exporter; int8 by onnxruntime's
quantize_dynamic of the MatMuls). For TANDEM_BENCH=field-peers (bench/suite/peers.mjs): bench/models/mimi.py,
pocket.py and stt.py call `export_step` for each step beside their tandem exports, on the same weights.

A step's state is every tensor its package keeps between calls, found by `state_slots`: moshi's
`_streaming_state` objects (their tensors and those of the ring KV caches they hold; `exec_mask`, always
true, and empty tensors stay constants of the graph) or pocket-tts' dict of dicts. The ONNX file's inputs are
the step's inputs then `state0`, `state1`, ...; its outputs the step's outputs then `state0_out`, ...
Beside NAME.onnx: NAME.json (the inputs, outputs and state: names, dtypes, shapes; the state's byte
offsets in NAME.state) and NAME.state (the state to start from, raw little-endian)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

SKIP = ("exec_mask",)


def moshi_states(module: nn.Module) -> list:
    """The `_streaming_state` objects of moshi's streaming modules under module (inside `streaming(1)`)."""
    return [m._streaming_state for m in module.modules() if getattr(m, "_streaming_state", None) is not None]


def state_slots(*roots) -> list[tuple[object, object]]:
    """(container, key) of every non-empty tensor reachable from roots through dicts and plain objects'
    attributes (not modules, not callables), in a fixed order."""
    out, seen = [], set()

    def walk(obj):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        items = list(obj.items()) if isinstance(obj, dict) else list(vars(obj).items())
        for k, v in items:
            if k in SKIP:
                continue
            if isinstance(v, torch.Tensor):
                if v.numel():
                    out.append((obj, k))
            elif isinstance(v, dict) or (hasattr(v, "__dict__") and not isinstance(v, nn.Module) and not callable(v)):
                walk(v)

    for r in roots:
        walk(r)
    return out


def _get(slot):
    c, k = slot
    return c[k] if isinstance(c, dict) else getattr(c, k)


def _set(slot, v):
    c, k = slot
    if isinstance(c, dict):
        c[k] = v
    else:
        setattr(c, k, v)


def state_values(slots) -> list[torch.Tensor]:
    return [_get(s).clone() for s in slots]


@contextlib.contextmanager
def state_set(slots, values):
    """The slots hold `values` (as they are: a step writes into them) inside, their own tensors after."""
    saved = [_get(s) for s in slots]
    for s, v in zip(slots, values):
        _set(s, v)
    try:
        yield
    finally:
        for s, v in zip(slots, saved):
            _set(s, v)


class StateIO(nn.Module):
    """fn(*inputs) with the state slots' tensors as trailing inputs, returning fn's outputs (a tensor or a
    tuple of them) then the slots' new tensors. `owner` (the model fn belongs to) is a submodule, so its
    weights are the graph's initializers."""

    def __init__(self, fn, slots, n_inputs: int, owner: nn.Module):
        super().__init__()
        self.fn, self.slots, self.n, self.owner = fn, slots, n_inputs, owner

    def forward(self, *args):
        state = [t.clone() for t in args[self.n :]]  # the step writes into its state in place
        with state_set(self.slots, state):
            y = self.fn(*args[: self.n])
            new = [_get(s) for s in self.slots]
        return (*(y if isinstance(y, tuple) else (y,)), *new)


def changed_slots(fn, inputs, slots) -> list[int]:
    """The indices of the slots a call of fn(*inputs) changes (run on copies of their tensors): a step's own
    state, not that of the model's other steps (Mimi's decoder is not the encoder's state), nor what stays
    as it was made (pocket-tts' `pad`), which the graph keeps as a constant."""
    before = state_values(slots)
    with torch.no_grad(), state_set(slots, state_values(slots)):
        fn(*inputs)
        after = [_get(s) for s in slots]
    return [i for i, (a, b) in enumerate(zip(before, after)) if a.shape != b.shape or not torch.equal(a, b)]


def export_step(fn, inputs, slots, owner, path: Path, input_names, output_names, start=None) -> int:
    """Exports fn(*inputs) with the state of slots it changes (changed_slots) as I/O to path (.onnx,
    .json, .state; the state file holds `start`, default the slots' values now). The slots keep their
    tensors. Returns the number of state tensors."""
    start = state_values(slots) if start is None else start
    keep = changed_slots(fn, inputs, slots)
    slots, start = [slots[i] for i in keep], [start[i] for i in keep]
    n = len(slots)
    wrapper = StateIO(fn, slots, len(inputs), owner)
    for op, onnx_op in (("__ior_", "Or"), ("__iand_", "And")):  # moshi's `mask |= ...` on bools
        torch.onnx.register_custom_op_symbolic(f"aten::{op}", lambda g, a, b, o=onnx_op: g.op(o, a, b), 17)
    try:  # moshi's torch.compile'd functions (its RMS norm) run eagerly: TorchScript cannot trace a compiled one
        from moshi.utils.compile import no_compile
    except ImportError:
        no_compile = contextlib.nullcontext
    with torch.no_grad(), no_compile():
        torch.onnx.export(
            wrapper,
            (*inputs, *state_values(slots)),
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=[*input_names, *(f"state{i}" for i in range(n))],
            output_names=[*output_names, *(f"state{i}_out" for i in range(n))],
        )
    _fix_graph(path)
    blob, state, offset = bytearray(), [], 0
    for i, t in enumerate(start):
        a = t.contiguous().numpy()
        state.append({"name": f"state{i}", "dtype": str(a.dtype), "shape": list(a.shape), "offset": offset})
        blob += a.tobytes()
        offset += a.nbytes
    desc = lambda ts, names: [{"name": m, "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)} for m, t in zip(names, ts)]  # noqa: E731
    info = {"inputs": desc(inputs, input_names), "outputs": output_names, "state": state}
    path.with_suffix(".json").write_text(json.dumps(info))
    path.with_suffix(".state").write_bytes(bytes(blob))
    return n


def _fix_graph(path: Path) -> None:
    """What onnxruntime needs of the exporter's graph: it has no Where over bools (moshi's and pocket-tts'
    convs keep a `first` flag updated by one), so each becomes a Where over uint8 between Casts; and its
    nodes in topological order."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(path))
    inferred = onnx.shape_inference.infer_shapes(model).graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*inferred.value_info, *inferred.input, *inferred.output)}
    nodes = []
    for i, node in enumerate(model.graph.node):
        if node.op_type != "Where" or types.get(node.output[0]) != TensorProto.BOOL:
            nodes.append(node)
            continue
        c, a, b = node.input
        t = f"bool_where{i}"
        nodes += [
            helper.make_node("Cast", [a], [t + "_a"], to=TensorProto.UINT8),
            helper.make_node("Cast", [b], [t + "_b"], to=TensorProto.UINT8),
            helper.make_node("Where", [c, t + "_a", t + "_b"], [t + "_y"]),
            helper.make_node("Cast", [t + "_y"], list(node.output), to=TensorProto.BOOL),
        ]
    # the exporter's Identity of a weight used twice (moshi's norms share theirs) read as the weight
    # itself (onnxruntime's optimizer loses some of them), and the nodes in the order of their inputs
    weights, outputs = {v.name for v in model.graph.initializer}, {v.name for v in model.graph.output}
    alias = {n.output[0]: n.input[0] for n in nodes if n.op_type == "Identity" and n.input[0] in weights and n.output[0] not in outputs}
    nodes = [n for n in nodes if n.output[0] not in alias]
    for n in nodes:
        for k, i in enumerate(n.input):
            n.input[k] = alias.get(i, i)
    known = {v.name for v in (*model.graph.input, *model.graph.initializer)} | {""}
    ordered = []
    while nodes:
        later = []
        for n in nodes:
            if all(i in known for i in n.input):
                ordered.append(n)
                known.update(n.output)
            else:
                later.append(n)
        assert len(later) < len(nodes), "the graph has a cycle or an undefined input"
        nodes = later
    del model.graph.node[:]
    model.graph.node.extend(ordered)
    onnx.save(model, str(path))


def quantize_int8(src: Path, dst: Path) -> None:
    """onnxruntime's dynamic quantization as the community ports run it: the MatMuls' weights int8
    (QInt8, per tensor), their activations quantized per call (MatMulInteger). Linear layers traced as Gemm
    (2-D inputs) and the convolutions stay float32. dst's .json and .state are src's."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"])
    for ext in (".json", ".state"):
        dst.with_suffix(ext).write_bytes(src.with_suffix(ext).read_bytes())


class Session:
    """Python onnxruntime running an export_step file from its start state, one call per step: for the
    check against eager before anything is timed."""

    def __init__(self, path: Path, threads: int = 1):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = threads
        self.s = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.info = json.loads(path.with_suffix(".json").read_text())
        raw = path.with_suffix(".state").read_bytes()
        self.state = {
            d["name"]: np.frombuffer(raw, d["dtype"], int(np.prod(d["shape"], dtype=np.int64)), d["offset"]).reshape(d["shape"]).copy()
            for d in self.info["state"]
        }

    def __call__(self, *inputs):
        feeds = {d["name"]: np.asarray(x) for d, x in zip(self.info["inputs"], inputs)}
        out = self.s.run(None, {**feeds, **self.state})
        k = len(self.info["outputs"])
        self.state = {d["name"]: v for d, v in zip(self.info["state"], out[k:])}
        return out[:k]


def check(path: Path, steps, atol: float, exact_ints: bool = True) -> dict:
    """Runs path over steps [(inputs, eager outputs)] from its start state; asserts every float output within
    atol of eager's and, with exact_ints, every integer output equal. Returns the max |diff| and the integer
    elements that differ."""
    s, diff, miss = Session(path), 0.0, 0
    for inputs, want in steps:
        got = s(*[x.numpy() for x in inputs])
        for g, w in zip(got, want):
            w = w.numpy()
            if np.issubdtype(w.dtype, np.integer) or w.dtype == bool:
                miss += int((g != w).sum())
            else:
                diff = max(diff, float(np.abs(g - w).max()))
    assert diff <= atol and (miss == 0 or not exact_ints), f"{path.name} differs from eager: max |diff| {diff:.2e}, {miss} integers"
    return {"max_diff": diff, "int_miss": miss}


@contextlib.contextmanager
def moshi_patches():
    """moshi as the TorchScript exporter can follow it: LMGen's `scatter_with_mask_` writes its token
    cache through a slice (`state.cache[:, :1]`), a write the exporter drops, so it writes the whole
    cache instead (the same values)."""
    from unittest import mock

    import moshi.models.lm as lm

    def scatter_with_mask_(tensor, dim, index, value, mask):
        value = torch.where(mask, value, tensor.gather(dim, index))
        base = tensor._base
        if base is None:
            tensor.scatter_(dim, index, value)
            return
        a = tensor.storage_offset() // base.stride(1)  # tensor is base[:, a:b]
        b = a + tensor.shape[1]
        base.copy_(torch.cat([base[:, :a], tensor.scatter(dim, index, value), base[:, b:]], dim=1))

    with mock.patch.object(lm, "scatter_with_mask_", scatter_with_mask_):
        yield


@contextlib.contextmanager
def pocket_patches():
    """pocket-tts as the community ports export it: the flow LM's KV cache offset kept a tensor (the
    package reads it with .item(), which a trace would freeze), and the flow's noise at temperature 0
    the zeros it is (torch.empty + normal_ traces as a float64 constant)."""
    from unittest import mock

    import pocket_tts.modules.attention as attention

    def complete_kv(cache, offset, k, v):
        o = offset.view(-1)[0]
        cache[0, :, o : o + k.shape[1]] = k
        cache[1, :, o : o + v.shape[1]] = v
        valid = cache[:, :, : o + k.shape[1]]
        return valid[0], valid[1]

    def normal_(t, mean=0.0, std=1.0, generator=None):
        return t.zero_().add_(mean) if std == 0 else t.copy_(torch.randn_like(t) * std + mean)

    with mock.patch.object(attention, "complete_kv", complete_kv), mock.patch.object(torch.nn.init, "normal_", normal_):
        yield
