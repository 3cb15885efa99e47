/* tandem.h — the C contract of the tandem runtime. Everything not declared here is private.
 *
 * A Program is an immutable, verified .tandem file: constants, the state specs with their initial
 * values, and the methods. A Session is a Program plus one contiguous state region (persistent
 * between calls) and one scratch arena (shared by the methods, which run one at a time). Methods
 * read and write the state region in place; nothing is allocated while a method runs.
 *
 * Conventions: every function returns a tdm_status (TDM_OK = 0) or a plain value; a detail
 * message for people is available from tdm_last_error() after any failure. A bad file or an
 * out-of-memory condition never aborts. Handles are opaque; tdm_x_free(NULL) is a no-op.
 */
#ifndef TANDEM_H
#define TANDEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the API: the native library is built with hidden visibility (CMakeLists.txt), so these
 * functions are all it exports. */
#ifndef TDM_API
#if defined(__GNUC__) && !defined(__wasm__)
#define TDM_API __attribute__((visibility("default")))
#else
#define TDM_API
#endif
#endif

#define TDM_FORMAT_VERSION 4u /* reads versions 1 to 4 (int4 weights from version 4 only) */
#define TDM_MAX_RANK 8

/* Append-only: numbers are kept forever. */
typedef enum tdm_status {
  TDM_OK = 0,
  TDM_ERR_INVALID_ARGUMENT = 1, /* a NULL handle, an index out of range, ... (caller error) */
  TDM_ERR_OUT_OF_MEMORY = 2,
  TDM_ERR_TRUNCATED = 3,       /* the file ends before a structure it declares */
  TDM_ERR_BAD_MAGIC = 4,       /* not a .tandem file */
  TDM_ERR_VERSION = 5,         /* a format version this runtime does not read */
  TDM_ERR_MALFORMED = 6,       /* a count, offset, size, index or reference is invalid */
  TDM_ERR_UNKNOWN_OP = 7,      /* an operator this runtime does not have */
  TDM_ERR_OP_RULE = 8,         /* an op's operands break its dtype/shape/attribute rule */
  TDM_ERR_NOT_FOUND = 9,       /* no method or state tensor of that name */
  TDM_ERR_INDEX = 10,          /* a runtime index value is out of range (state untouched) */
  TDM_ERR_LIMIT = 11,          /* a declared size is above the configured cap */
  TDM_ERR_STATE_MISMATCH = 12, /* state bytes of the wrong size or program */
  TDM_ERR_SHAPE = 13,          /* an input's size is outside its dim's bounds or disagrees with
                                   another input (state untouched) */
  TDM_ERR_GUARD = 14           /* a branch the export specialized on would go the other way in this
                                   call (a `guard` op; state untouched) */
} tdm_status;

/* Append-only. Element sizes: F32 4, I64 8, BOOL 1 (0 or 1), I32 4. I8 (1), I4X2 (1 byte holding
 * two signed 4-bit values, low nibble first), BF16 (2: a float32's top 16 bits) and I16 (2) are
 * constant-only: quantized weights that only the quantized ops read; never a method's input,
 * output or state, nor any other op's operand. */
typedef enum tdm_dtype {
  TDM_F32 = 1,
  TDM_I64 = 2,
  TDM_BOOL = 3,
  TDM_I8 = 4,
  TDM_I4X2 = 5,
  TDM_I32 = 6,
  TDM_BF16 = 7,
  TDM_I16 = 8
} tdm_dtype;

typedef struct tdm_program tdm_program;
typedef struct tdm_session tdm_session;

/* Human-readable name of a status ("TDM_ERR_MALFORMED"), never NULL. */
TDM_API const char *tdm_status_string(tdm_status s);
/* Detail message of the last failure on this thread (borrowed, valid until the next call). */
TDM_API const char *tdm_last_error(void);
/* Element size in bytes of a dtype, 0 for an unknown one. */
TDM_API size_t tdm_dtype_size(int dtype);
/* Name of a dtype ("float32", "int64", "bool"), "?" for an unknown one. */
TDM_API const char *tdm_dtype_name(int dtype);

/* Memory from the runtime's allocator (64-byte aligned). Used by hosts that hand file bytes over
 * with tdm_program_load_owned. */
TDM_API void *tdm_malloc(size_t size);
TDM_API void tdm_free(void *p);

/* Cap on the bytes a program may declare (constants + state + scratch); loading a file that
 * declares more fails with TDM_ERR_LIMIT before anything is allocated. 0 restores the default
 * (1 GiB). Process-wide. */
TDM_API void tdm_set_max_declared_bytes(uint64_t max_bytes);

/* Load and fully verify a program. `data` is borrowed for the call only (copied). On success
 * *out owns the program; free it with tdm_program_free once every session on it is freed. */
TDM_API tdm_status tdm_program_load(const void *data, size_t size, tdm_program **out);
/* As tdm_program_load, but takes ownership of `data`, which must come from tdm_malloc; it is
 * freed on failure too. Avoids a second copy of the file. */
TDM_API tdm_status tdm_program_load_owned(void *data, size_t size, tdm_program **out);
TDM_API void tdm_program_free(tdm_program *p);

/* Introspection. Indices are 0-based; out-of-range indices return 0 / NULL / -1. Strings are
 * borrowed from the program. `io` is 0 for inputs, 1 for outputs. */
TDM_API uint32_t tdm_program_method_count(const tdm_program *p);
TDM_API const char *tdm_program_method_name(const tdm_program *p, uint32_t method);
TDM_API int32_t tdm_program_find_method(const tdm_program *p, const char *name); /* -1 if absent */
TDM_API uint32_t tdm_method_io_count(const tdm_program *p, uint32_t method, int io);
TDM_API const char *tdm_method_io_name(const tdm_program *p, uint32_t method, int io, uint32_t i);
TDM_API int tdm_method_io_dtype(const tdm_program *p, uint32_t method, int io, uint32_t i);
TDM_API int tdm_method_io_rank(const tdm_program *p, uint32_t method, int io, uint32_t i);
TDM_API int64_t tdm_method_io_dim(const tdm_program *p, uint32_t method, int io, uint32_t i, int d);
TDM_API size_t tdm_method_io_nbytes(const tdm_program *p, uint32_t method, int io, uint32_t i);
TDM_API uint32_t tdm_program_state_count(const tdm_program *p);
TDM_API const char *tdm_state_name(const tdm_program *p, uint32_t i);
TDM_API int tdm_state_dtype(const tdm_program *p, uint32_t i);
TDM_API int tdm_state_rank(const tdm_program *p, uint32_t i);
TDM_API int64_t tdm_state_dim(const tdm_program *p, uint32_t i, int d);
TDM_API size_t tdm_state_offset(const tdm_program *p, uint32_t i); /* byte offset in the state region */
TDM_API size_t tdm_state_nbytes(const tdm_program *p, uint32_t i);
TDM_API size_t tdm_program_state_size(const tdm_program *p);   /* bytes of the state region */
TDM_API size_t tdm_program_scratch_size(const tdm_program *p); /* bytes of one session's scratch */
/* Hash of the state layout (each state tensor's name, dtype, shape, offset and size, and the
 * region's size): programs with equal fingerprints read each other's saved state. */
TDM_API uint64_t tdm_program_fingerprint(const tdm_program *p);
/* Hash of the program's structure (every section but the data, and the data's size): which
 * program wrote a saved state. */
TDM_API uint64_t tdm_program_id(const tdm_program *p);

/* Metadata: named values stored beside the methods (e.g. "max_cache_len"), each as JSON text.
 * Strings are borrowed from the program; out-of-range indices return NULL. */
TDM_API uint32_t tdm_program_metadata_count(const tdm_program *p);
TDM_API const char *tdm_program_metadata_name(const tdm_program *p, uint32_t i);
TDM_API const char *tdm_program_metadata_value(const tdm_program *p, uint32_t i);

/* A session on `p` (borrowed: p must outlive the session). Its state starts at the initial
 * values. */
TDM_API tdm_status tdm_session_create(const tdm_program *p, tdm_session **out);
TDM_API void tdm_session_free(tdm_session *s);
/* Copy the initial values back into the state region. */
TDM_API void tdm_session_reset_state(tdm_session *s);
/* The state region: tdm_program_state_size(p) bytes, contiguous, owned by the session. */
TDM_API void *tdm_session_state(tdm_session *s);

/* Calling a method: write each input's bytes (dtype and shape as declared, C order; for a method
 * with dynamic dims, at the shape set by tdm_session_set_input_shape, below) at
 * tdm_session_input(s, m, i), call tdm_session_run, then read each output at
 * tdm_session_output(s, m, i) (tdm_session_io_nbytes bytes). A run either completes or fails before changing the state.
 *
 * Lifetimes. The pointers themselves stay valid until tdm_session_free. The bytes they show do
 * not: every method of a session shares one scratch arena, and outputs may also be views of the
 * state region. An output's bytes are the method's result only until the next change to the
 * session: writing any method's inputs (another method's input may occupy the same bytes), a run
 * of any method, tdm_session_reset_state, a write through tdm_session_state, or free. So copy the
 * outputs out right after the run, before writing the next call's inputs. Input bytes likewise
 * hold what was written until the next run or input write of another method.
 *
 * Versions. A method exported in versions (methods `name#k`: a Python value it branches on) runs
 * the version the state selects; its outputs are the method's, or none where the branch returns
 * None, and then tdm_session_output gives NULL for every i (a host returns None / null). */
TDM_API void *tdm_session_input(tdm_session *s, uint32_t method, uint32_t i);
TDM_API tdm_status tdm_session_run(tdm_session *s, uint32_t method);
TDM_API const void *tdm_session_output(tdm_session *s, uint32_t method, uint32_t i);

/* Dynamic dims. A method may declare dims (e.g. "n", a prompt's length) with bounds [min, max];
 * an input or output dim may then be a size that depends on them (n, n + 1, 2*n). Memory is
 * planned at the maximum and every op was verified at load at the bounds; each call runs at its
 * actual size. tdm_method_io_dim and tdm_method_io_nbytes give the maximum.
 *
 * Before a run, give each input with a dynamic dim its actual shape with
 * tdm_session_set_input_shape (C order, `rank` must be the declared rank; a static dim must be
 * the declared size), then write its bytes, contiguous at that shape, at tdm_session_input. An
 * input keeps the shape last set (initially the maximum). tdm_session_run binds every dim from
 * the inputs, fails with TDM_ERR_SHAPE (nothing run, state unchanged) when a size is outside its
 * bounds or two inputs disagree, and computes every value's actual shape. After the run,
 * tdm_session_io_dim / tdm_session_io_nbytes give each output's actual shape and size (valid
 * until the next run of that method; for a method without dims, the declared ones). */
TDM_API uint32_t tdm_method_dim_count(const tdm_program *p, uint32_t method);
TDM_API const char *tdm_method_dim_name(const tdm_program *p, uint32_t method, uint32_t dim); /* borrowed */
TDM_API int64_t tdm_method_dim_min(const tdm_program *p, uint32_t method, uint32_t dim);      /* -1 if absent */
TDM_API int64_t tdm_method_dim_max(const tdm_program *p, uint32_t method, uint32_t dim);      /* -1 if absent */
/* The expression of input/output dim d, e.g. "n", "n + 1", "2*n - 1", written NUL-terminated into
 * buf[size] (truncated to fit); returns its length, 0 for a static dim (buf gets ""). */
TDM_API size_t tdm_method_io_dim_expr(const tdm_program *p, uint32_t method, int io, uint32_t i, int d, char *buf, size_t size);
/* `dims` [rank] is borrowed for the call. TDM_ERR_SHAPE (the input keeps its shape) if the rank
 * differs, a static dim differs or a dynamic size is outside [0, its maximum] (or, for a dim that
 * is exactly a method dim, outside that dim's bounds). */
TDM_API tdm_status tdm_session_set_input_shape(tdm_session *s, uint32_t method, uint32_t i, const int64_t *dims, int rank);
/* Actual dim d of input/output i (io 0/1) as described above; -1 if absent. */
TDM_API int64_t tdm_session_io_dim(const tdm_session *s, uint32_t method, int io, uint32_t i, int d);
TDM_API size_t tdm_session_io_nbytes(const tdm_session *s, uint32_t method, int io, uint32_t i);

/* Profiling: the ops of a method (names borrowed from the program), and a run that records the
 * milliseconds each op took into op_ms[tdm_method_op_count(p, method)] (borrowed for the call). */
TDM_API uint32_t tdm_method_op_count(const tdm_program *p, uint32_t method);
TDM_API const char *tdm_method_op_name(const tdm_program *p, uint32_t method, uint32_t op);
TDM_API tdm_status tdm_session_run_profiled(tdm_session *s, uint32_t method, double *op_ms);
/* Bytes an op writes per run: the sum of its outputs' bytes, except that an update in place
 * (index_put, slice_scatter whose output is its base) writes only its new rows, i.e. the bytes of
 * its values input. Known at load (at the maximum of any dims); 0 for an index out of range. The second
 * function counts only the bytes that land in the state region. */
TDM_API size_t tdm_method_op_bytes_written(const tdm_program *p, uint32_t method, uint32_t op);
TDM_API size_t tdm_method_op_state_bytes_written(const tdm_program *p, uint32_t method, uint32_t op);

/* The plan, for a backend other than this runtime's kernels (web/webgpu/: the program's ops run as
 * GPU kernels over buffers laid out as the plan says). Method-local value indices as in the file
 * (docs/format.md); every out-of-range index returns 0 / UINT32_MAX / TDM_ERR_INVALID_ARGUMENT.
 * The data section (constants and initial state values; a constant value's offset counts from its
 * start), borrowed from the program, exactly as the file has it (what the CPU kernels prepare from
 * it, such as the Winograd transforms of some convs, docs/ops.md, lives in memory of their own): */
TDM_API const void *tdm_program_data(const tdm_program *p);
TDM_API size_t tdm_program_data_size(const tdm_program *p);
TDM_API uint32_t tdm_method_value_count(const tdm_program *p, uint32_t method);
/* The value index of input/output i (io 0/1). */
TDM_API uint32_t tdm_method_io_value(const tdm_program *p, uint32_t method, int io, uint32_t i);
/* Binds a method's dims from the input shapes set by tdm_session_set_input_shape, as
 * tdm_session_run does, without running it (TDM_ERR_SHAPE as there; TDM_OK for a method without
 * dims). The session_ functions below then give the values and attributes at those sizes. */
TDM_API tdm_status tdm_session_bind(tdm_session *s, uint32_t method);
/* Value v as the session last bound it: out[13] = dtype, region (0 scratch, 1 constant, 2 state),
 * ref (the constant's or state's index), byte offset (in the scratch arena, the data section or
 * the state region), rank, dims[8] (0 past the rank). */
TDM_API tdm_status tdm_session_value_info(const tdm_session *s, uint32_t method, uint32_t v, int64_t *out);
/* Op operands: io 0 the inputs, 1 the outputs; operand j's value index. */
TDM_API uint32_t tdm_method_op_operand_count(const tdm_program *p, uint32_t method, uint32_t op, int io);
TDM_API uint32_t tdm_method_op_operand(const tdm_program *p, uint32_t method, uint32_t op, int io, uint32_t j);
/* Op attributes: kind 0 integer, 1 float; an integer attribute as the session last bound it. */
TDM_API uint32_t tdm_method_op_attr_count(const tdm_program *p, uint32_t method, uint32_t op, int kind);
TDM_API int64_t tdm_session_op_iattr(const tdm_session *s, uint32_t method, uint32_t op, uint32_t j);
TDM_API double tdm_method_op_fattr(const tdm_program *p, uint32_t method, uint32_t op, uint32_t j);

/* Threads. A method's parallel parts (GEMM and GEMV by output panels or rows, attention by heads
 * and query rows, convolutions by output channels) run on n threads over this runtime's memory;
 * results are bit-identical for every n (each part is cut into chunks fixed by its size and n
 * alone, 4 per thread, which the threads take as they come free).
 * The threaded wasm build (web/tandem-mt.wasm, shared memory) runs them on real threads: the host
 * starts n - 1 workers, each an instance of the same module over the same memory that calls
 * tdm_thread_worker(i, ws) for i = 1 .. n-1 (ws: TDM_THREAD_WS_BYTES of memory of its own, 64-byte
 * aligned), then calls tdm_threads_start(n, can_block) (can_block = 0 where the caller may not
 * wait, such as a browser's main thread: it then spins until the workers finish, which they do
 * within the part). tdm_thread_worker returns after tdm_threads_stop, which is final in that
 * build. Every other build (native, tandem.wasm) has no workers: tdm_threads_start(n, .) makes the
 * caller run all the chunks in turn, so a test can check a split without threads, and
 * tdm_thread_worker returns at once. One method runs at a time per runtime instance; parts never
 * fail and never allocate. */
#define TDM_THREAD_WS_BYTES (256 * 1024)
TDM_API tdm_status tdm_threads_start(int32_t n, int32_t can_block);
TDM_API void tdm_thread_worker(int32_t index, void *ws);
TDM_API void tdm_threads_stop(void);
TDM_API int32_t tdm_threads_count(void); /* 1 until tdm_threads_start, and after tdm_threads_stop */

/* What this build of the runtime was compiled with: TDM_BUILD_THREADS (workers can run parts:
 * tandem-mt*.wasm), TDM_BUILD_RELAXED_SIMD (kernels use relaxed SIMD's fused multiply-add:
 * tandem-*relaxed.wasm; such a module only compiles in engines with relaxed SIMD),
 * TDM_BUILD_NATIVE_SIMD (a native library running the SIMD128 kernels through SIMDe: SSE2 on
 * x86-64, NEON on arm64), TDM_BUILD_AVX2_FMA (this process runs the native AVX2+FMA GEMM/GEMV
 * kernels: an x86-64 CPU with AVX2 and FMA, and TANDEM_NATIVE_ISA=simd128 not set),
 * TDM_BUILD_AVX512 (and its AVX-512 GEMM tiles: the CPU has AVX-512F, TANDEM_NATIVE_ISA not avx2). */
#define TDM_BUILD_THREADS 1
#define TDM_BUILD_RELAXED_SIMD 2
#define TDM_BUILD_NATIVE_SIMD 4
#define TDM_BUILD_AVX2_FMA 8
#define TDM_BUILD_AVX512 16
TDM_API int32_t tdm_build_features(void);

#ifdef __cplusplus
}
#endif
#endif
