/* reader.c — the only reader of .tandem files: the header, the section table, and the strings,
 * metadata, constants and states sections into a tdm_program (the methods section: reader_methods.c),
 * every invariant of docs/format.md checked before a program is returned. */
#include "reader.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tandem reads little-endian files in place; a big-endian host needs byte swapping"
#endif

/* Section ids, record sizes and alignment come from python/tandem/schema.py (src/schema.h); the reads
 * below take each record field by field, in the order these sums spell out. */
_Static_assert(TDM_HEADER_SIZE == 4 + 4 + 8 + 4 + 4 + 8, "header layout");
_Static_assert(TDM_SECTION_SIZE == 4 + 4 + 8 + 8, "section entry layout");
_Static_assert(TDM_CONSTANT_SIZE == 4 + 1 + 1 + 2 + 8 + 8, "constant layout");
_Static_assert(TDM_STATES_HEAD_SIZE == 8 + 4 && TDM_STATE_SIZE == 4 + 1 + 1 + 1 + 1 + 8 + 8 + 8, "state layout");
_Static_assert(TDM_METHOD_SIZE == 6 * 4 + 8, "method layout");
_Static_assert(TDM_VALUE_SIZE == 1 + 1 + 1 + 1 + 4 + 8 && TDM_IO_SIZE == 4 + 4, "value and io layout");
_Static_assert(TDM_OP_HEADER_SIZE == 4 + 4 * 2, "op layout");
#define MAX_METHODS 4096

static const char *const section_names[] = TDM_SECTION_NAMES;
#define OLDEST_VERSION 1 /* version 1: no metadata section; version 2: no dims; version 3: int4 weights two k per byte row */

tdm_status tdm__truncated(const rd *r) {
  return tdm__fail(TDM_ERR_TRUNCATED,
                   "the %s section ends before the data it declares (at byte %zu of %zu): the file is truncated or corrupt", r->what,
                   r->pos, r->n);
}

tdm_status tdm__read_shape(rd *r, int dtype, int rank, tdm_shape *s, int64_t *numel, size_t *nbytes, const char *ctx) {
  if (tdm_dtype_size(dtype) == 0) return tdm__fail(TDM_ERR_MALFORMED, "%s: unknown dtype %d", ctx, dtype);
  if (rank > TDM_MAX_RANK) return tdm__fail(TDM_ERR_MALFORMED, "%s: rank %d is above the maximum %d", ctx, rank, TDM_MAX_RANK);
  s->rank = rank;
  size_t n = 1;
  for (int i = 0; i < rank; i++) {
    uint64_t d = rd_u64(r);
    if (r->bad) return tdm__truncated(r);
    if (d > (uint64_t)INT64_MAX) return tdm__fail(TDM_ERR_MALFORMED, "%s: dim %d is negative", ctx, i);
    if (d > SIZE_MAX || !tdm__mul_size(n, (size_t)d, &n)) return tdm__fail(TDM_ERR_MALFORMED, "%s: the element count overflows", ctx);
    s->dims[i] = (int64_t)d;
  }
  for (int i = rank; i < TDM_MAX_RANK; i++) s->dims[i] = 0;
  if (n > (size_t)INT64_MAX || !tdm__mul_size(n, tdm_dtype_size(dtype), nbytes))
    return tdm__fail(TDM_ERR_MALFORMED, "%s: the byte size overflows", ctx);
  *numel = (int64_t)n;
  return TDM_OK;
}

tdm_status tdm__string_ref(const tdm_program *p, uint32_t i, const char **out, const char *ctx) {
  if (i >= p->n_strings) return tdm__fail(TDM_ERR_MALFORMED, "%s: string index %u is out of range (%u strings)", ctx, i, p->n_strings);
  *out = p->strings[i];
  return TDM_OK;
}

static uint64_t fnv1a(const uint8_t *p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

tdm_status tdm__read_program(tdm_program *p) {
  const uint8_t *f = p->file;
  const size_t size = p->file_size;
  if (size < 4 || memcmp(f, TDM_FILE_MAGIC, 4) != 0)
    return tdm__fail(TDM_ERR_BAD_MAGIC, "not a .tandem file: it does not start with the bytes '" TDM_FILE_MAGIC "'");
  if (size < TDM_HEADER_SIZE)
    return tdm__fail(TDM_ERR_TRUNCATED, "the file is %zu bytes, shorter than the %d-byte header: it is truncated", size, TDM_HEADER_SIZE);
  rd h = {f, size, 4, false, "header"};
  const uint32_t version = rd_u32(&h);
  const uint64_t declared = rd_u64(&h);
  const uint32_t n_sec = rd_u32(&h), flags = rd_u32(&h);
  const uint64_t reserved = rd_u64(&h);
  if (version < OLDEST_VERSION || version > TDM_FORMAT_VERSION)
    return tdm__fail(TDM_ERR_VERSION, "format version %u; this runtime reads versions %d to %u: re-export the model with a matching tandem",
                     version, OLDEST_VERSION, TDM_FORMAT_VERSION);
  if (declared != size)
    return tdm__fail(declared > size ? TDM_ERR_TRUNCATED : TDM_ERR_MALFORMED, "the header declares %llu bytes but %zu were given%s",
                     (unsigned long long)declared, size, declared > size ? ": the file is truncated" : "");
  /* version 1 files have every section but the metadata (the last id) */
  const int n_want = version == 1 ? TDM_SEC_COUNT - 1 : TDM_SEC_COUNT;
  if (n_sec != (uint32_t)n_want || flags != 0 || reserved != 0)
    return tdm__fail(TDM_ERR_MALFORMED, "header: %u sections (expected %d), flags %u, reserved %llu (expected 0)", n_sec, n_want, flags,
                     (unsigned long long)reserved);
  rd sec[TDM_SEC_COUNT + 1];
  memset(sec, 0, sizeof sec);
  if ((size_t)n_want * TDM_SECTION_SIZE > size - TDM_HEADER_SIZE) return tdm__fail(TDM_ERR_TRUNCATED, "the section table is truncated");
  for (int i = 0; i < n_want; i++) {
    const uint32_t id = rd_u32(&h), res = rd_u32(&h);
    const uint64_t off = rd_u64(&h), len = rd_u64(&h);
    if (id < 1 || id > (uint32_t)n_want || sec[id].p || res != 0)
      return tdm__fail(TDM_ERR_MALFORMED, "section table entry %d: id %u is unknown or repeated", i, id);
    if (off < TDM_HEADER_SIZE + (uint64_t)n_want * TDM_SECTION_SIZE || !tdm__range_inside(off, len, size))
      return tdm__fail(TDM_ERR_MALFORMED, "the %s section [%llu, +%llu) lies outside the file (%zu bytes)", section_names[id],
                       (unsigned long long)off, (unsigned long long)len, size);
    sec[id] = (rd){f + off, (size_t)len, 0, false, section_names[id]};
  }
  for (int a = 1; a <= n_want; a++)
    for (int b = a + 1; b <= n_want; b++)
      if (tdm__ranges_overlap((size_t)(sec[a].p - f), sec[a].n, (size_t)(sec[b].p - f), sec[b].n))
        return tdm__fail(TDM_ERR_MALFORMED, "the %s and %s sections overlap", section_names[a], section_names[b]);
  if ((size_t)(sec[TDM_SEC_DATA].p - f) % TDM_FILE_ALIGN)
    return tdm__fail(TDM_ERR_MALFORMED, "the data section is not %d-byte aligned", TDM_FILE_ALIGN);
  p->data = sec[TDM_SEC_DATA].p;
  p->data_size = sec[TDM_SEC_DATA].n;

  /* Counts first, so one arena holds everything. */
  rd rs = sec[TDM_SEC_STRINGS], rc = sec[TDM_SEC_CONSTANTS], rst = sec[TDM_SEC_STATES], rm = sec[TDM_SEC_METHODS];
  p->n_strings = rd_u32(&rs);
  p->n_consts = rd_u32(&rc);
  const uint64_t state_size = rd_u64(&rst);
  p->n_states = rd_u32(&rst);
  p->n_methods = rd_u32(&rm);
  rd rmd = sec[TDM_SEC_METADATA];
  p->n_metadata = version >= 2 ? rd_u32(&rmd) : 0;
  if (rmd.bad) return tdm__truncated(&rmd);
  if (p->n_metadata > rd_left(&rmd) / TDM_METADATA_ENTRY_SIZE) return tdm__truncated(&rmd);
  if (rs.bad) return tdm__truncated(&rs);
  if (rc.bad) return tdm__truncated(&rc);
  if (rst.bad) return tdm__truncated(&rst);
  if (rm.bad) return tdm__truncated(&rm);
  if (p->n_strings > rd_left(&rs) / (TDM_STRING_SIZE + 1)) return tdm__truncated(&rs); /* + its 0 byte */
  if (p->n_consts > rd_left(&rc) / TDM_CONSTANT_SIZE) return tdm__truncated(&rc);
  if (p->n_states > rd_left(&rst) / TDM_STATE_SIZE) return tdm__truncated(&rst);
  if (p->n_methods > rd_left(&rm) / TDM_METHOD_SIZE) return tdm__truncated(&rm);
  if (p->n_methods > MAX_METHODS) return tdm__fail(TDM_ERR_LIMIT, "%u methods, above the maximum %d", p->n_methods, MAX_METHODS);
  const uint64_t cap = tdm__max_declared_bytes();
  if (state_size > cap || state_size > SIZE_MAX)
    return tdm__fail(TDM_ERR_LIMIT, "the state region declares %llu bytes, above the cap of %llu", (unsigned long long)state_size,
                     (unsigned long long)cap);
  p->state_size = (size_t)state_size;
  counts c = {0};
  p->version = version;
  tdm_status s = tdm__count_methods(rm, p->n_methods, version, &c);
  if (s) return s;
  size_t arena = 0, part;
  const size_t parts[][2] = {{p->n_strings, sizeof(char *)},
                             {p->n_consts, sizeof(tdm_const)},
                             {p->n_states, sizeof(tdm_state)},
                             {p->n_methods, sizeof(tdm_method)},
                             {p->n_metadata, 2 * sizeof(char *)},
                             {c.refs, 4},
                             {c.iattrs, 8},
                             {c.fattrs, 8},
                             {c.values, sizeof(tdm_value)},
                             {c.ios, sizeof(tdm_io)},
                             {c.ops, sizeof(tdm_op)},
                             {c.dims, sizeof(tdm_dim)},
                             {c.syms, sizeof(tdm_sym)},
                             {c.terms, sizeof(tdm_term)}};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    if (!tdm__mul_size(parts[i][0], parts[i][1], &part) || !tdm__align_size(part, 16, &part) || !tdm__add_size(arena, part, &arena))
      return tdm__fail(TDM_ERR_LIMIT, "the file declares more structures than fit in memory");
  p->arena = tdm__calloc(arena);
  if (!p->arena) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes for the program's tables", arena);
  carver cv = {p->arena};
  p->strings = carve(&cv, p->n_strings * sizeof(char *));
  p->consts = carve(&cv, p->n_consts * sizeof(tdm_const));
  p->states = carve(&cv, p->n_states * sizeof(tdm_state));
  p->methods = carve(&cv, p->n_methods * sizeof(tdm_method));
  p->metadata = carve(&cv, p->n_metadata * 2 * sizeof(char *));

  for (uint32_t i = 0; i < p->n_strings; i++) {
    const uint32_t len = rd_u32(&rs);
    if (rs.bad || len >= rd_left(&rs)) return tdm__truncated(&rs);
    const char *str = (const char *)rs.p + rs.pos;
    if (memchr(str, 0, len) || str[len] != 0)
      return tdm__fail(TDM_ERR_MALFORMED, "string %u is not NUL-terminated at its declared length %u", i, len);
    p->strings[i] = str;
    rs.pos += (size_t)len + 1;
  }
  if (rd_left(&rs)) return tdm__fail(TDM_ERR_MALFORMED, "the strings section has %zu trailing bytes", rd_left(&rs));

  /* Metadata: unique non-empty names, each with its value as JSON text (parsed by the hosts). */
  char ctx[64];
  for (uint32_t i = 0; i < p->n_metadata; i++) {
    const uint32_t key = rd_u32(&rmd), value = rd_u32(&rmd);
    if (rmd.bad) return tdm__truncated(&rmd);
    snprintf(ctx, sizeof ctx, "metadata entry %u", i);
    if ((s = tdm__string_ref(p, key, &p->metadata[2 * i], ctx)) || (s = tdm__string_ref(p, value, &p->metadata[2 * i + 1], ctx))) return s;
    if (!p->metadata[2 * i][0]) return tdm__fail(TDM_ERR_MALFORMED, "%s has an empty name", ctx);
    for (uint32_t e = 0; e < i; e++)
      if (strcmp(p->metadata[2 * e], p->metadata[2 * i]) == 0)
        return tdm__fail(TDM_ERR_MALFORMED, "two metadata entries are named '%s'", p->metadata[2 * i]);
  }
  if (rd_left(&rmd)) return tdm__fail(TDM_ERR_MALFORMED, "the metadata section has %zu trailing bytes", rd_left(&rmd));

  for (uint32_t i = 0; i < p->n_consts; i++) {
    tdm_const *k = &p->consts[i];
    snprintf(ctx, sizeof ctx, "constant %u", i);
    const uint32_t name = rd_u32(&rc);
    k->dtype = rd_u8(&rc);
    const int rank = rd_u8(&rc);
    const uint16_t res = rd_u16(&rc);
    const uint64_t off = rd_u64(&rc), nbytes = rd_u64(&rc);
    int64_t numel;
    if (rc.bad) return tdm__truncated(&rc);
    if ((s = tdm__string_ref(p, name, &k->name, ctx)) || (s = tdm__read_shape(&rc, k->dtype, rank, &k->shape, &numel, &k->nbytes, ctx)))
      return s;
    if (k->dtype == TDM_I4X2 && version < 4)
      return tdm__fail(TDM_ERR_VERSION, "constant '%s': int4 weights of a version %u file are in an older layout: re-export the model",
                       k->name, version);
    if (res != 0 || nbytes != k->nbytes)
      return tdm__fail(TDM_ERR_MALFORMED, "constant '%s': declares %llu bytes, its shape needs %zu", k->name, (unsigned long long)nbytes,
                       k->nbytes);
    if (off % TDM_FILE_ALIGN || !tdm__range_inside(off, nbytes, p->data_size))
      return tdm__fail(TDM_ERR_MALFORMED, "constant '%s': bytes [%llu, +%llu) are unaligned or outside the data section", k->name,
                       (unsigned long long)off, (unsigned long long)nbytes);
    k->data_offset = (size_t)off;
  }
  if (rd_left(&rc)) return tdm__fail(TDM_ERR_MALFORMED, "the constants section has %zu trailing bytes", rd_left(&rc));

  size_t state_end = 0;
  /* The fingerprint hashes the state layout only (names, dtypes, shapes, offsets, sizes), not
   * where the file keeps them (string indices, initial-value offsets): a program re-exported with
   * another method, other weights or other initial values reads the same saved state. */
  uint64_t fp = fnv1a((const uint8_t *)&state_size, 8, 1469598103934665603ull);
  fp = fnv1a((const uint8_t *)&p->n_states, 4, fp);
  for (uint32_t i = 0; i < p->n_states; i++) {
    tdm_state *st = &p->states[i];
    snprintf(ctx, sizeof ctx, "state %u", i);
    const uint32_t name = rd_u32(&rst);
    st->dtype = rd_u8(&rst);
    const int rank = rd_u8(&rst), init = rd_u8(&rst), res = rd_u8(&rst);
    const uint64_t off = rd_u64(&rst), nbytes = rd_u64(&rst), init_off = rd_u64(&rst);
    int64_t numel;
    if (rst.bad) return tdm__truncated(&rst);
    if ((s = tdm__string_ref(p, name, &st->name, ctx)) ||
        (s = tdm__read_shape(&rst, st->dtype, rank, &st->shape, &numel, &st->nbytes, ctx)))
      return s;
    if (res != 0 || init >= TDM_INIT_COUNT || nbytes != st->nbytes)
      return tdm__fail(TDM_ERR_MALFORMED, "state '%s': bad size, init kind or reserved byte", st->name);
    if (TDM_DTYPE_CONST_ONLY(st->dtype))
      return tdm__fail(TDM_ERR_MALFORMED, "state '%s': dtype %s is for constants only", st->name, tdm_dtype_name(st->dtype));
    if (off % TDM_FILE_ALIGN || off < state_end || !tdm__range_inside(off, nbytes, p->state_size))
      return tdm__fail(TDM_ERR_MALFORMED,
                       "state '%s': bytes [%llu, +%llu) are unaligned, out of order, overlapping or outside the state region (%zu bytes)",
                       st->name, (unsigned long long)off, (unsigned long long)nbytes, p->state_size);
    st->offset = (size_t)off;
    state_end = st->offset + st->nbytes;
    st->init_zero = init == TDM_INIT_ZEROS;
    if (!st->init_zero && (init_off % TDM_FILE_ALIGN || !tdm__range_inside(init_off, nbytes, p->data_size)))
      return tdm__fail(TDM_ERR_MALFORMED, "state '%s': its initial value lies outside the data section", st->name);
    if (st->init_zero && init_off != 0) return tdm__fail(TDM_ERR_MALFORMED, "state '%s': an all-zero state has a data offset", st->name);
    st->init_offset = (size_t)init_off;
    const uint64_t layout[3] = {(uint64_t)st->dtype | (uint64_t)rank << 8, st->offset, st->nbytes};
    fp = fnv1a((const uint8_t *)st->name, strlen(st->name) + 1, fp);
    fp = fnv1a((const uint8_t *)layout, sizeof layout, fp);
    fp = fnv1a((const uint8_t *)st->shape.dims, (size_t)rank * 8, fp);
  }
  if (rd_left(&rst)) return tdm__fail(TDM_ERR_MALFORMED, "the states section has %zu trailing bytes", rd_left(&rst));
  p->fingerprint = fp;
  /* The program's identity: every section but the data (weights are not hashed: too slow for
   * large files), and the data's size. */
  uint64_t id = 1469598103934665603ull;
  for (int i = 1; i <= TDM_SEC_COUNT; i++)
    if (i != TDM_SEC_DATA) id = fnv1a(sec[i].p, sec[i].n, id);
  const uint64_t data_size = p->data_size; /* 8 bytes on every host, so native and wasm ids agree */
  p->program_id = fnv1a((const uint8_t *)&data_size, sizeof data_size, id);

  if ((s = tdm__read_methods(p, rm, &cv, &c))) return s;
  if ((s = tdm__link_versions(p))) return s;
  size_t total;
  if (!tdm__add_size(p->state_size, p->scratch_size, &total) || total > cap)
    return tdm__fail(TDM_ERR_LIMIT, "state (%zu bytes) plus scratch (%zu bytes) is above the cap of %llu", p->state_size, p->scratch_size,
                     (unsigned long long)cap);
  return TDM_OK;
}
