"""Export errors point at the user's source line (this file's), never at tandem's or torch's, and
say what to do: data-dependent shapes (.item(), nonzero, boolean masks, `if` on a tensor),
unsupported dtypes, unsupported ops (all of them listed, each with its line). And what must not fail:
tensors of other dtypes a method does not use."""

import re

import pytest
import torch
from torch import nn

import tandem


def line_of(fn, marker: str) -> int:
    """The line number of the line of fn's source that contains marker."""
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if marker in ln)


def export_error(module, inputs, method="forward") -> str:
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(module, {method: inputs})
    return str(e.value)


def assert_points_here(msg: str, fn, marker: str):
    where = f"test_errors.py:{line_of(fn, marker)}"
    assert where in msg, f"expected {where} in: {msg}"
    assert not re.search(r"at (export|lower|ir|plan|fuse)\.py:", msg), msg


class ItemSlice(nn.Module):
    def forward(self, x, start):
        return x[:, start.item() : start.item() + 2] * 2  # ITEM


class NonZero(nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0).float()  # NONZERO


class Mask(nn.Module):
    def forward(self, x):
        return x[x > 0] + 1  # MASK


class Branch(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # BRANCH
            return x + 1
        return x - 1


class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("unused_u8", torch.arange(4, dtype=torch.uint8))
        self.register_buffer("unused_f16", torch.ones(3, dtype=torch.float16))
        self.register_buffer("w64", torch.linspace(0, 1, 3, dtype=torch.float64))
        self.register_buffer("steps", torch.zeros(1, dtype=torch.int16))

    def forward(self, x):
        return x * self.w64.float()

    def counted(self, x):
        return (x.to(torch.int16) + self.steps).float()  # STEPS


def test_item_bounded_slice_exports_and_a_start_out_of_range_fails_the_call():
    # .item() of a tensor as a slice start is a runtime index (python/tandem/runtime_values.py)
    m, x = ItemSlice(), torch.randn(2, 6)
    model = tandem.load(tandem.export(m, {"forward": (x, torch.tensor(1))}).to_bytes())
    for s in (0, 3, 4):
        torch.testing.assert_close(model.forward(x, torch.tensor(s)), m(x, torch.tensor(s)))
    for s in (5, -1):  # eager gives fewer rows (then * 2 works on them); tandem refuses the call
        with pytest.raises(tandem.TandemError) as e:
            model.forward(x, torch.tensor(s))
        assert e.value.code == "TDM_ERR_INDEX"


def test_item_of_a_float_names_the_line_and_what_to_do():
    class FloatItem(nn.Module):
        def forward(self, x, scale):
            return x * scale.item()  # FLOAT_ITEM

    msg = export_error(FloatItem(), (torch.randn(2, 6), torch.tensor(0.5)))
    assert_points_here(msg, FloatItem.forward, "# FLOAT_ITEM")
    assert ".item()" in msg


def test_narrow_with_a_tensor_start_exports_and_a_start_out_of_range_fails_the_call():
    class Narrow(nn.Module):
        def forward(self, x, start):
            return torch.narrow(x, 1, start, 2) * 2

    m, x = Narrow(), torch.randn(3, 6)
    model = tandem.load(tandem.export(m, {"forward": (x, torch.tensor(1))}).to_bytes())
    for s in (0, 4, -2, -6):
        torch.testing.assert_close(model.forward(x, torch.tensor(s)), m(x, torch.tensor(s)))
    for s in (5, -7):  # eager raises; the call fails before anything is written
        with pytest.raises(Exception):
            m(x, torch.tensor(s))
        with pytest.raises(tandem.TandemError) as e:
            model.forward(x, torch.tensor(s))
        assert e.value.code == "TDM_ERR_INDEX"


def test_nonzero_names_the_line_and_what_to_do():
    msg = export_error(NonZero(), (torch.randn(5),))
    assert_points_here(msg, NonZero.forward, "# NONZERO")
    assert "nonzero" in msg and "torch.where" in msg


def test_boolean_mask_names_the_line_and_what_to_do():
    msg = export_error(Mask(), (torch.randn(5),))
    assert_points_here(msg, Mask.forward, "# MASK")
    assert "x[mask]" in msg and "torch.where(mask, x, 0)" in msg


def test_branch_on_a_value_is_specialized_and_the_other_way_names_the_line():
    # specialized on the example's way, with a guard (docs/ops.md, "Values known at run time")
    x = torch.ones(5)
    model = tandem.load(tandem.export(Branch(), {"forward": (x,)}).to_bytes())
    torch.testing.assert_close(model.forward(x * 3), x * 3 + 1)
    with pytest.raises(tandem.TandemError) as e:
        model.forward(-x)
    assert e.value.code == "TDM_ERR_GUARD" and f"line {line_of(Branch.forward, '# BRANCH')}" in str(e.value)


def test_errors_in_a_bound_method_name_the_user_line_not_tandems():
    m = Holder()
    msg = export_error(None, tandem.Method(m.counted, (torch.ones(1),)), method="counted")
    assert_points_here(msg, Holder.counted, "# STEPS")
    assert "int16" in msg


def test_unused_tensors_of_other_dtypes_do_not_fail_and_float64_constants_become_float32():
    m = Holder()
    x = torch.randn(3)
    model = tandem.load(tandem.export(m, {"forward": (x,)}).to_bytes())
    torch.testing.assert_close(model.forward(x), m(x))


def test_float64_inputs_and_state_are_named():
    msg = export_error(nn.Identity(), (torch.ones(2, dtype=torch.float64),))
    assert "example input 0" in msg and "float64" in msg

    class State64(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("acc", torch.zeros(2, dtype=torch.float64))

        def forward(self, x):
            self.acc += x
            return x

    msg = export_error(State64(), (torch.ones(2, dtype=torch.float64).float(),))
    assert "state 'acc'" in msg and "float64" in msg


def test_float16_math_in_a_method_is_named_with_its_line():
    class Half(nn.Module):
        def forward(self, x):
            return (x.half() * 2).float()  # HALF

    msg = export_error(Half(), (torch.randn(3),))
    assert_points_here(msg, Half.forward, "# HALF")
    assert "float16" in msg


class Unsupported(nn.Module):
    def forward(self, x):
        a = torch.cumprod(x, 0)
        b = torch.kthvalue(x, 2).values
        return a + b


def test_unsupported_ops_are_all_listed_with_source_lines():
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(Unsupported(), {"forward": (torch.randn(5),)})
    msg = str(e.value)
    assert "cumprod" in msg and "kthvalue" in msg and "test_errors.py" in msg and "docs/ops.md" in msg


class DataDependent(nn.Module):
    def forward(self, x):
        return x[x > 0]


def test_dynamic_shapes_are_explained():
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(DataDependent(), {"forward": (torch.randn(5),)})
    assert "depends on values" in str(e.value) and "torch.where" in str(e.value) and "test_errors.py" in str(e.value)
