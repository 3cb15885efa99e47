"""Kernels apart from operators: a file that declares ops (TDM_OP) tests no
instruction set, the variant picks live in src/kernels/config.c, and every kernel variant that
src/kernels/variants.h declares is exercised by tests/c/kernel_selftest.c beside its reference."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "src" / "kernels"
ISA = re.compile(
    r"^\s*#\s*(?:if|elif|ifdef|ifndef)\b.*\b(TDM_SIMD128|TDM_X86_AVX2|TDM_RELAXED_SIMD|__wasm\w*|__x86_64__|__aarch64__|"
    r"__AVX\w*|__SSE\w*)",
    re.M,
)


def test_no_instruction_set_conditional_in_a_file_that_declares_ops():
    op_files = [p for p in sorted(KERNELS.glob("*.c")) if "TDM_OP(" in p.read_text()]
    assert {p.name for p in op_files} >= {"elementwise.c", "reduce.c", "attention.c", "conv.c", "quant.c"}
    found = {p.name: sorted(set(ISA.findall(p.read_text()))) for p in op_files if ISA.search(p.read_text())}
    assert found == {}, f"ops files with ISA conditionals (move the variant into <family>_<isa>.c): {found}"


def test_variant_files_declare_no_ops():
    variant_files = sorted(KERNELS.glob("*_simd128.c")) + sorted(KERNELS.glob("*_relaxed.c"))
    assert {p.name for p in variant_files} >= {"quant_simd128.c", "quant_relaxed.c"}
    for p in variant_files:
        assert "TDM_OP(" not in p.read_text(), p.name


def test_config_picks_the_elementwise_reduction_and_attention_variants():
    config = (KERNELS / "config.c").read_text()
    for fn in (
        "tdm_f32_binary_row",
        "tdm_f32_unary",
        "tdm_f32_sum_trailing",
        "tdm_f32_softmax_row",
        "tdm_f32_layer_norm_row",
        "tdm_f32_layer_norm_4groups",
        "tdm_f32_rms_norm_row",
        "tdm_f32_attention_rows",
    ):
        assert len(re.findall(rf"\btdm_\w+_fn {fn} =", config)) == 2, f"config.c sets {fn} once per build (SIMD128, scalar)"


def test_config_picks_the_quantized_variants():
    config = (KERNELS / "config.c").read_text()
    for fn in ("tdm_q8_gemm", "tdm_q4_gemm", "tdm_q8_gemm_tiles", "tdm_q4_gemm_tiles", "tdm_q8_gemv_dot"):
        n = len(re.findall(rf"\btdm_\w+_fn {fn} =", config))
        assert n == 3, f"config.c sets {fn} once per build (native x86-64, SIMD128, scalar), not {n} times"
    # the int4 integer GEMVs: the relaxed dot's, native x86-64 (AVX2 or SIMD128), SIMD128, scalar
    assert len(re.findall(r"\btdm_q4_gemv_dot_fn tdm_q4_gemv_dot =", config)) == 4
    assert len(re.findall(r"\btdm_q4_gemm_dot_fn tdm_q4_gemm_dot =", config)) == 4


def test_every_declared_variant_is_in_the_kernel_selftest():
    selftest = (ROOT / "tests" / "c" / "kernel_selftest.c").read_text()
    declared = set()
    for h in ("variants.h", "gemm.h", "vec.h"):
        declared |= set(re.findall(r"\b(tdm_\w+__(?:scalar|simd128|relaxed|avx2|avx512))\b", (KERNELS / h).read_text()))
    missing = sorted(n for n in declared if n not in selftest)
    assert missing == [], f"declared variants the kernel self-test never calls: {missing}"


def test_one_enum_per_sub_op_family():
    variants = (KERNELS / "variants.h").read_text()
    for prefix in ("TDM_B_", "TDM_U_", "TDM_R_", "TDM_SM_", "TDM_ARG_"):
        assert len(re.findall(rf"enum \{{\s*{prefix}", variants)) == 1, prefix
    for p in sorted(KERNELS.glob("*.c")):
        text = p.read_text()
        assert not re.search(r"^enum \{ R_", text, re.M), f"{p.name} declares its own sub-op codes"
        bare = re.findall(r"TDM_OP\((argmax|argmin|softmax|log_softmax|sum|mean|amax|amin|any|all), \d", text)
        assert not bare, f"{p.name}: {bare} take a bare sub-op code"
