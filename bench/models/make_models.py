"""Exports every benchmark model twice: as a .tandem program and, for the peers, as ONNX (with
state as inputs and outputs, since onnxruntime-web keeps none between calls).

    python bench/models/make_models.py build/bench
"""

import os
import sys
import warnings
from pathlib import Path

import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "tests")]
warnings.filterwarnings("ignore")
import tandem  # noqa: E402
from models.families import CausalConvBlock, StreamingCodec, TinyLM, rotate  # noqa: E402

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "build/bench")
OUT.mkdir(parents=True, exist_ok=True)
torch.manual_seed(0)
# TANDEM_BENCH=image,codec (bench/suite/run.sh) exports only what those sections of bench/suite/bench.mjs read.
ONLY = [x.strip() for x in os.environ["TANDEM_BENCH"].split(",")] if os.environ.get("TANDEM_BENCH") else None


def want(*sections):
    return ONLY is None or any(s in ONLY for s in sections)


def save_onnx(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(OUT / f"{name}.onnx"))


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


class MatMulW(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(w)

    def forward(self, a):
        return a @ self.w


if want("gemm", "memory", "threads"):
    for m, n in [(64, 64), (256, 256), (512, 512), (1024, 1024), (1, 512), (1, 2048)]:
        w = torch.randn(n, n)
        name = f"mm_{m}x{n}"
        tandem.export(MatMulW(w), {"forward": (torch.randn(m, n),)}).save(OUT / f"{name}.tandem")
        save_onnx(
            name,
            [helper.make_node("MatMul", ["A", "W"], ["Y"])],
            [vi("A", [m, n])],
            [vi("Y", [m, n])],
            [numpy_helper.from_array(w.numpy(), "W")],
        )


class StateAdd(nn.Module):
    """A step whose only work is state += x, with x one element (broadcast): what it measures is
    the cost of keeping the state, not of moving an input as large as the state."""

    def __init__(self, n):
        super().__init__()
        self.register_buffer("state", torch.zeros(n))

    def forward(self, x):
        self.state.add_(x)


if want("state"):
    for nbytes in [64, 512 * 1024, 4 * 1024 * 1024]:
        n = nbytes // 4
        tandem.export(StateAdd(n), {"forward": (torch.randn(1),)}).save(OUT / f"state_{nbytes}.tandem")
        save_onnx(
            f"state_{nbytes}",
            [helper.make_node("Add", ["state", "x"], ["state_out"])],
            [vi("state", [n]), vi("x", [1])],
            [vi("state_out", [n])],
            [],
        )

# ---- transformer decode step: 4 layers, width 256, 4 heads, context 512 ----------------------
if want("decode", "memory"):
    lm = TinyLM(vocab=96, d=256, heads=4, layers=4, capacity=512, chunk=16).eval()
    tandem.export(
        lm, {"prefill": (torch.zeros(1, 16, dtype=torch.long),), "decode": (torch.zeros(1, 1, dtype=torch.long),), "reset": ()}
    ).save(OUT / "lm.tandem")


class LMStepIO(nn.Module):
    """The same decode step with the KV cache and position as inputs and outputs (for ONNX)."""

    def __init__(self, tm):
        super().__init__()
        self.tm = tm

    def forward(self, token, pos, kc, vc):
        tm = self.tm
        cos, sin = tm.cos[pos], tm.sin[pos]
        mask = torch.arange(tm.capacity)[None, :] <= pos[:, None]
        x = tm.emb(token)
        ks, vs = [], []
        for i, blk in enumerate(tm.blocks):
            a = blk.attn
            h = blk.norm1(x)
            B, T, D = h.shape
            q, k, v = (t.view(B, T, a.heads, a.dh).transpose(1, 2) for t in a.qkv(h).split(D, dim=-1))
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            kci, vci = kc[i].index_copy(2, pos, k), vc[i].index_copy(2, pos, v)
            y = F.scaled_dot_product_attention(q, kci, vci, attn_mask=mask)
            x = x + a.out(y.transpose(1, 2).reshape(B, T, D))
            x = x + blk.down(blk.act(blk.up(blk.norm2(x))))
            ks.append(kci)
            vs.append(vci)
        return tm.norm(x[:, -1]) @ tm.emb.weight.t(), torch.stack(ks), torch.stack(vs)


if want("decode", "memory"):
    cache = torch.zeros(4, 1, 4, 512, 64)
    step = LMStepIO(lm)
    args = (torch.zeros(1, 1, dtype=torch.long), torch.tensor([3]), torch.randn(4, 1, 4, 512, 64), torch.randn(4, 1, 4, 512, 64))
    with torch.no_grad():
        ref = step(*args)
        torch.onnx.export(
            step,
            args,
            str(OUT / "lm.onnx"),
            dynamo=False,
            opset_version=17,
            input_names=["token", "pos", "k", "v"],
            output_names=["logits", "k_out", "v_out"],
        )

# ---- streaming convolution chunk -------------------------------------------------------------
if want("conv", "memory"):
    conv = CausalConvBlock(channels=128, out=128, k=5, chunk=64)
    tandem.export(conv, {"forward": (torch.randn(1, 128, 64),), "reset": ()}).save(OUT / "conv.tandem")


class ConvIO(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.b = block

    def forward(self, chunk, context):
        x = torch.cat([context, chunk], dim=2)
        return self.b._block(x), x[:, :, -(self.b.k - 1) :]


if want("conv", "memory"):
    with torch.no_grad():
        torch.onnx.export(
            ConvIO(conv),
            (torch.randn(1, 128, 64), torch.zeros(1, 128, 4)),
            str(OUT / "conv.onnx"),
            dynamo=False,
            opset_version=17,
            input_names=["chunk", "context"],
            output_names=["y", "context_out"],
        )

# ---- torchvision image classifiers, 224x224, eval, random weights -----------------------------
if want("image"):
    import torchvision  # noqa: E402  (installed by bench/suite/run.sh, --no-deps)

    for name in ["resnet18", "mobilenet_v3_small"]:
        torch.manual_seed(0)
        net = getattr(torchvision.models, name)(weights=None).eval()
        with torch.no_grad():  # non-trivial batch norm statistics, as after training
            for mod in net.modules():
                if isinstance(mod, nn.BatchNorm2d):
                    mod.running_mean.uniform_(-0.2, 0.2)
                    mod.running_var.uniform_(0.5, 1.5)
        image = torch.randn(1, 3, 224, 224)
        tandem.export(net, {"forward": (image,)}).save(OUT / f"{name}.tandem")
        with torch.no_grad():
            torch.onnx.export(
                net, (image,), str(OUT / f"{name}.onnx"), dynamo=False, opset_version=17, input_names=["x"], output_names=["y"]
            )

# ---- streaming codec: encode and decode steps of one 80 ms chunk (1920 samples at 24 kHz) -------
if want("codec"):
    codec = StreamingCodec().eval()  # 16 base channels, ratios 4·5·6·4 (hop 480), latent 128, 2 layers
    FRAMES = codec.chunk // codec.hop
    tandem.export(
        codec, {"encode_step": (torch.randn(1, 1, codec.chunk),), "decode_step": (torch.randn(1, 128, FRAMES),), "reset": ()}
    ).save(OUT / "codec.tandem")


class CodecStepIO(nn.Module):
    """One step of the codec with its state (the convs' contexts, the transposed convs' overlaps,
    the ring buffers, their positions and the frame counter) as inputs and outputs, for ONNX."""

    def __init__(self, codec, step, names):
        super().__init__()
        self.codec, self.step, self.names = codec, step, names

    def forward(self, x, *state):
        bufs = {n: t.clone() for n, t in zip(self.names, state)}  # the step updates these in place
        saved = {}
        for n, t in bufs.items():
            owner, leaf = self.codec.get_submodule(n.rpartition(".")[0]), n.rpartition(".")[2]
            saved[n] = owner._buffers[leaf]
            owner._buffers[leaf] = t
        try:
            y = getattr(self.codec, self.step)(x)
        finally:
            for n, t in saved.items():
                self.codec.get_submodule(n.rpartition(".")[0])._buffers[n.rpartition(".")[2]] = t
        return (y,) + tuple(bufs[n] for n in self.names)


if want("codec"):
    STATE_KEYS = ("previous", "partial", "k_cache", "v_cache", "slot_pos", "offset")
    codec_state = {}
    for step, prefix, x in [
        ("encode_step", ("encoder.", "encoder_transformer."), torch.randn(1, 1, codec.chunk)),
        ("decode_step", ("decoder.", "decoder_transformer."), torch.randn(1, 128, FRAMES)),
    ]:
        names = [n for n, _ in codec.named_buffers() if n.startswith(prefix) and n.split(".")[-1] in STATE_KEYS]
        state = [codec.get_buffer(n).clone() for n in names]
        codec_state[step] = names
        with torch.no_grad():
            torch.onnx.export(
                CodecStepIO(codec, step, names),
                (x, *state),
                str(OUT / f"codec_{step}.onnx"),
                dynamo=False,
                opset_version=17,
                input_names=["x"] + [f"s{i}" for i in range(len(names))],
                output_names=["y"] + [f"s{i}_out" for i in range(len(names))],
            )
    (OUT / "codec_state.json").write_text(
        __import__("json").dumps(
            {
                step: [
                    {
                        "name": n,
                        "shape": list(codec.get_buffer(n).shape),
                        "dtype": str(codec.get_buffer(n).dtype).replace("torch.", ""),
                        "fill": codec.get_buffer(n).flatten()[0].item(),
                    }
                    for n in names
                ]
                for step, names in codec_state.items()
            }
        )
    )

# ---- a ~50 MB program for the load benchmark ---------------------------------------------------
if want("load"):
    big = nn.Sequential(nn.Linear(2048, 2048), nn.Linear(2048, 2048), nn.Linear(2048, 2048))
    tandem.export(big, {"forward": (torch.randn(1, 2048),)}).save(OUT / "big.tandem")

# ---- one linear layer at SmolLM's shapes, float32 / int8 / int4, for bench/suite/toolchain.mjs's GEMV rows -
if want("toolchain"):
    for K, N in [(576, 1536), (1536, 576), (576, 49152)]:
        lin = nn.Linear(K, N, bias=False)
        for width in ("float32", "int8", "int4"):
            tandem.export(lin, {"forward": (torch.randn(1, K),)}, quantize=None if width == "float32" else width).save(
                OUT / f"gemv_{width}_{K}x{N}.tandem"
            )


# ---- the transformer GEMVs of Mimi (d512, 2 rows per step) and pocket-tts' flow LM (d1024, 1 row), for
# bench/suite/gemv.mjs: each linear layer alone, and a stack of all of a model's layers' weights in one call
class GemvStack(nn.Module):
    """Each layer's projections as its transformer runs them (in-projection 3d, out-projection,
    feed-forward up and down), with residual adds only: the weights stream once per call."""

    def __init__(self, d, ffn, layers):
        super().__init__()
        lin = lambda k, n: nn.Linear(k, n, bias=False)  # noqa: E731
        self.d = d
        self.layers = nn.ModuleList(nn.ModuleList([lin(d, 3 * d), lin(d, d), lin(d, ffn), lin(ffn, d)]) for _ in range(layers))

    def forward(self, x):
        for qkv, out, up, down in self.layers:
            x = x + qkv(x)[:, : self.d]
            x = x + out(x)
            x = x + down(up(x))
        return x


if ONLY and "gemv" in ONLY:  # opt-in (TANDEM_BENCH=gemv): the two stacks are 384 MiB of weights
    for rows, d, ffn, layers, tag in [(2, 512, 2048, 8, "mimi"), (1, 1024, 4096, 6, "pocket")]:
        for K, N in [(d, 3 * d), (d, d), (d, ffn), (ffn, d)]:
            tandem.export(nn.Linear(K, N, bias=False), {"forward": (torch.randn(rows, K),)}).save(OUT / f"gemv{rows}_{K}x{N}.tandem")
        tandem.export(GemvStack(d, ffn, layers), {"forward": (torch.randn(rows, d),)}).save(OUT / f"gemv_stack_{tag}.tandem")

# ---- a SmolLM-135M-shaped transformers Llama, as .tandem and as an ONNX step (bench/models/smollm.py) --
if want("smollm", "threads", "llm"):
    import smollm  # noqa: E402

    smollm.main(OUT)

# ---- the same weights at int8 and int4 for tandem and onnxruntime-web, and as GGUF (bench/models/llm.py) -
if want("llm"):
    import llm  # noqa: E402

    llm.main(OUT)

print(f"benchmark models in {OUT}")
