"""The lowering lives in the package tandem.lowering (python/tandem/lowering/: core, driver and one
file of handlers per op family, as src/kernels/). This module only re-exports the names lower.py had,
for the handler files other branches add as python/tandem/lower_<topic>.py (`from .lower import
handles, Lowering, ...`, registered by one import line at the end of this file); tandem.export imports
it so those files register.

TODO(#25): move each lower_<topic>.py into tandem/lowering/<family>.py (importing from .core), then
delete this module.
"""
# ruff: noqa: F401, I001
import math
import operator

import torch

from . import lowering, schema
from .ir import (AS_FLOAT32, AS_INT32, BOOL, CONST, DTYPE_CODE, DTYPE_SIZE, F32, I32, I64, SCRATCH, STATE, SUPPORTED_DTYPES,
                 TORCH_DTYPE, ExportError, MethodIR, Op, Storage, SymDim, Value, as_size)
from .lowering.core import (FILL_MAX_NUMEL, FOLD_MAX_NUMEL, HANDLERS, Lowering, _DIM_MAX, _DIM_MIN, _DIM_NAMES, _corners, _dim,
                            _dtype_of, _has_size, _is_affine, _meta, _position, _require_static, _shape_of, _size, _static,
                            aten, handles, size_expr_text, sym_range)
from .lowering.provenance import (_STDLIB, _TANDEM_DIR, is_user_file, source_line)
from .lowering.layout import (PANEL, pack_panels)
from .lowering.shape import (FOLDABLE_EXTRA, _arange, _cat, _constant_pad, _copy, _empty, _expand, _fill, _full, _full_like,
                             _is_slice_of, _ones, _permute, _repeat, _scalar_tensor, _select, _slice, _slice_value, _split,
                             _to_copy, _view, _zeros)
from .lowering.elementwise import (BINARY, CLASSIFY, COMPARE, UNARY, _binary, _bitwise_bool, _bitwise_not, _clamp, _classify,
                                   _compute_dtype, _div_mode, _elu, _fmod, _gelu, _one_hot_dim, _rsub, _unary, _where,
                                   _where_as_slice_scatter)
from .lowering.linalg import (_VIEWS, _addmm, _cdist_matmul, _int_matmul, _is_call, _is_ones, _matmul, _mm, _producer,
                              _sum_of_squares_of, _through_views)
from .lowering.reduce import (REDUCE, _any_all, _argmax, _cumsum, _group_norm, _layer_norm, _reduce, _softmax, _sum_all, _var,
                              _var_handler)
from .lowering.index import (_advanced_index, _checked_index, _embedding, _gather, _in_range_by_construction, _index,
                             _index_put, _index_select, _index_select_value, _mask_put, _producer_op, _put_rows, _rows_index,
                             _scatter, _scatter_handler, _scatter_into, _select_op, _select_scatter, _slice_scatter, _sort,
                             _topk)
from .lowering.attention import (_sdpa, _unrepeat_kv)
from .lowering.conv import (CONV_CHUNK_FLOATS, _avg_pool, _batch_norm_eval, _conv_transpose, _convolution, _fold_into_conv,
                            _max_pool, _pool, conv_gemm_chunk)
from .lowering.driver import (SIZE_OPS, _assert_async, _assertion, _check_empty_reads, _finish, _fold, _has_symdim, _size_op,
                              _stand_in, _unread_items, _values_in, lower_method)

# lower_<topic>.py files of other branches: one import line each below, so their @handles register.
