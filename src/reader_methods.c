/* reader_methods.c — the methods section: values, inputs and outputs, ops (each verified as it is
 * read, verify.c), and a dynamic method's dims and symbolic sizes (format version 3), verified again
 * at the corners of the dims' box (bind.c). */
#include "ops.h"
#include "reader.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

#define MAX_IO 1024

/* Pass 1 over the methods section: bounds, counts, totals for the arena. Nothing is stored. */
tdm_status tdm__count_methods(rd r, uint32_t n_methods, uint32_t version, counts *c) {
  for (uint32_t mi = 0; mi < n_methods; mi++) {
    uint32_t hdr[6];
    for (int i = 0; i < 6; i++) hdr[i] = rd_u32(&r);
    rd_u64(&r);
    if (r.bad) return tdm__truncated(&r);
    const uint32_t nv = hdr[1], ni = hdr[2], no = hdr[3], nops = hdr[4];
    if (ni > MAX_IO || no > MAX_IO) return tdm__fail(TDM_ERR_LIMIT, "method %u declares more than %d inputs or outputs", mi, MAX_IO);
    /* each value takes >= 16 bytes, each io 8, each op 12: counts are bounded by the section */
    if (nv > rd_left(&r) / TDM_VALUE_SIZE || nops > rd_left(&r) / TDM_OP_HEADER_SIZE || (size_t)ni + no > rd_left(&r) / TDM_IO_SIZE)
      return tdm__truncated(&r);
    for (uint32_t v = 0; v < nv; v++) {
      rd_u8(&r);
      const uint8_t rank = rd_u8(&r);
      rd_u16(&r);
      rd_u32(&r);
      rd_u64(&r);
      if (r.bad) return tdm__truncated(&r);
      if (rank > TDM_MAX_RANK)
        return tdm__fail(TDM_ERR_MALFORMED, "method %u value %u: rank %u is above the maximum %d", mi, v, rank, TDM_MAX_RANK);
      if ((size_t)rank * 8 > rd_left(&r)) return tdm__truncated(&r);
      r.pos += (size_t)rank * 8;
    }
    if ((size_t)(ni + no) * 8 > rd_left(&r)) return tdm__truncated(&r);
    r.pos += (size_t)(ni + no) * 8;
    for (uint32_t k = 0; k < nops; k++) {
      rd_u32(&r);
      const uint16_t a = rd_u16(&r), b = rd_u16(&r), ia = rd_u16(&r), fa = rd_u16(&r);
      if (r.bad) return tdm__truncated(&r);
      const size_t body = (size_t)(a + b) * 4 + (size_t)(ia + fa) * 8;
      if (body > rd_left(&r)) return tdm__truncated(&r);
      r.pos += body;
      c->refs += (size_t)a + b;
      c->iattrs += ia;
      c->fattrs += fa;
    }
    if (version >= 3) { /* dims, then symbolic sizes */
      const uint32_t nd = hdr[5];
      if (nd > TDM_MAX_DIMS)
        return tdm__fail(TDM_ERR_LIMIT, "method %u declares %u dynamic dims, above the maximum %d", mi, nd, TDM_MAX_DIMS);
      if ((size_t)nd * TDM_DIM_SIZE > rd_left(&r)) return tdm__truncated(&r);
      r.pos += (size_t)nd * TDM_DIM_SIZE;
      const uint32_t ns = rd_u32(&r);
      if (r.bad) return tdm__truncated(&r);
      if (ns > rd_left(&r) / TDM_SYM_SIZE) return tdm__truncated(&r);
      for (uint32_t k = 0; k < ns; k++) {
        if (rd_left(&r) < TDM_SYM_SIZE) return tdm__truncated(&r);
        r.pos += 8; /* kind, reserved, index, target */
        const uint32_t nt = rd_u32(&r);
        r.pos += 4 + 8; /* reserved2, constant */
        if (nt > TDM_MAX_DIMS)
          return tdm__fail(TDM_ERR_MALFORMED, "method %u symbolic size %u has %u terms, above the maximum %d", mi, k, nt, TDM_MAX_DIMS);
        if ((size_t)nt * TDM_TERM_SIZE > rd_left(&r)) return tdm__truncated(&r);
        r.pos += (size_t)nt * TDM_TERM_SIZE;
        c->terms += nt;
      }
      c->dims += nd;
      c->syms += ns;
    }
    c->values += nv;
    c->ios += (size_t)ni + no;
    c->ops += nops;
  }
  if (rd_left(&r) != 0) return tdm__fail(TDM_ERR_MALFORMED, "the methods section has %zu bytes after its last method", rd_left(&r));
  return TDM_OK;
}

static const char *const sym_kinds[] = {"dim", "offset", "iattr"};

/* Version 3: a method's dims and symbolic sizes after its ops; every op verified again at the
 * minimum of every dim (at every corner of the box of dims when there are at most 4 dims). */
static tdm_status read_dims(const tdm_program *p, tdm_method *m, rd *r, tdm_term **terms) {
  char ctx[160];
  tdm_status s;
  int64_t maxs[TDM_MAX_DIMS];
  for (uint32_t d = 0; d < m->n_dims; d++) {
    tdm_dim *dim = &m->dims[d];
    const uint32_t name = rd_u32(r), res = rd_u32(r);
    dim->min = (int64_t)rd_u64(r);
    dim->max = (int64_t)rd_u64(r);
    if (r->bad) return tdm__truncated(r);
    snprintf(ctx, sizeof ctx, "method '%s' dim %u", m->name, d);
    if ((s = tdm__string_ref(p, name, &dim->name, ctx))) return s;
    if (!dim->name[0]) return tdm__fail(TDM_ERR_MALFORMED, "%s: empty name", ctx);
    dim->state = -1;
    if (res != 0) { /* 1 + the index of the int64 state whose first element the dim is */
      if (res - 1 >= p->n_states || p->states[res - 1].dtype != TDM_I64 || p->states[res - 1].nbytes < 8)
        return tdm__fail(TDM_ERR_MALFORMED, "%s ('%s'): bound from state %u, which is not an int64 state of the program", ctx, dim->name,
                         res - 1);
      dim->state = (int32_t)(res - 1);
    }
    if (dim->min < 0 || dim->min > dim->max || dim->max > INT32_MAX)
      return tdm__fail(TDM_ERR_MALFORMED, "%s ('%s'): bounds [%lld, %lld] are not 0 <= min <= max < 2^31", ctx, dim->name,
                       (long long)dim->min, (long long)dim->max);
    for (uint32_t e = 0; e < d; e++)
      if (strcmp(m->dims[e].name, dim->name) == 0)
        return tdm__fail(TDM_ERR_MALFORMED, "method '%s': two dims are named '%s'", m->name, dim->name);
    dim->axis = -1;
    maxs[d] = dim->max;
  }
  m->n_syms = rd_u32(r);
  if (r->bad) return tdm__truncated(r);
  for (uint32_t i = 0; i < m->n_syms; i++) {
    tdm_sym *y = &m->syms[i];
    y->kind = rd_u8(r);
    const uint8_t res = rd_u8(r);
    y->index = rd_u16(r);
    y->target = rd_u32(r);
    y->n_terms = rd_u32(r);
    const uint32_t res2 = rd_u32(r);
    y->constant = (int64_t)rd_u64(r);
    if (r->bad) return tdm__truncated(r);
    snprintf(ctx, sizeof ctx, "method '%s' symbolic size %u", m->name, i);
    if (res || res2 || y->kind > TDM_SYM_IATTR || y->n_terms == 0 || y->constant > TDM_MAX_SYM_COEF || y->constant < -TDM_MAX_SYM_COEF)
      return tdm__fail(TDM_ERR_MALFORMED, "%s: unknown kind %u, no terms, a constant out of range or a nonzero reserved field", ctx,
                       y->kind);
    tdm_term *t = *terms;
    y->terms = t;
    for (uint32_t j = 0; j < y->n_terms; j++) {
      t[j].dim = rd_u32(r);
      const uint32_t tres = rd_u32(r);
      t[j].coef = (int64_t)rd_u64(r);
      if (r->bad) return tdm__truncated(r);
      if (tres || t[j].dim >= m->n_dims || t[j].coef == 0 || t[j].coef > TDM_MAX_SYM_COEF || t[j].coef < -TDM_MAX_SYM_COEF)
        return tdm__fail(TDM_ERR_MALFORMED,
                         "%s term %u: dim %u out of range (%u dims), a zero or too large coefficient, or a nonzero reserved field", ctx, j,
                         t[j].dim, m->n_dims);
      for (uint32_t e = 0; e < j; e++)
        if (t[e].dim == t[j].dim) return tdm__fail(TDM_ERR_MALFORMED, "%s names dim %u twice", ctx, t[j].dim);
    }
    *terms += y->n_terms;
    int64_t at_max;
    if (!tdm__eval_sym(y, maxs, &at_max)) return tdm__fail(TDM_ERR_MALFORMED, "%s overflows at the maximum", ctx);
    int64_t stored;
    if (y->kind == TDM_SYM_IATTR) {
      if (y->target >= m->n_ops || y->index >= m->ops[y->target].n_iattr)
        return tdm__fail(TDM_ERR_MALFORMED, "%s: op %u attribute %u does not exist", ctx, y->target, y->index);
      if (tdm__is_cond(&m->ops[y->target])) return tdm__fail(TDM_ERR_MALFORMED, "%s: a cond's branch lengths do not follow the dims", ctx);
      stored = m->ops[y->target].iattr[y->index];
    } else {
      if (y->target >= m->n_values) return tdm__fail(TDM_ERR_MALFORMED, "%s: value %u does not exist", ctx, y->target);
      const tdm_value *x = &m->values[y->target];
      if (y->kind == TDM_SYM_DIM && y->index >= x->shape.rank)
        return tdm__fail(TDM_ERR_MALFORMED, "%s: value %u has no dim %u", ctx, y->target, y->index);
      /* the tensor the value views: the method's scratch, or its constant or state tensor */
      y->base = 0;
      y->limit = m->scratch_size;
      const uint32_t ref = x->ref;
      if (x->region == TDM_REGION_CONST) y->base = p->consts[ref].data_offset, y->limit = y->base + p->consts[ref].nbytes;
      if (x->region == TDM_REGION_STATE) y->base = p->states[ref].offset, y->limit = y->base + p->states[ref].nbytes;
      stored = y->kind == TDM_SYM_DIM ? x->shape.dims[y->index] : (int64_t)(x->offset - y->base);
    }
    if (at_max != stored)
      return tdm__fail(TDM_ERR_MALFORMED, "%s (%s of %u) is %lld at the maximum of every dim, but the file stores %lld there", ctx,
                       sym_kinds[y->kind], y->target, (long long)at_max, (long long)stored);
    for (uint32_t e = 0; e < i; e++)
      if (m->syms[e].kind == y->kind && m->syms[e].target == y->target && m->syms[e].index == y->index)
        return tdm__fail(TDM_ERR_MALFORMED, "%s: %s %u of %u has two symbolic sizes", ctx, sym_kinds[y->kind], y->index, y->target);
    for (uint32_t k = 0; k < m->n_inputs; k++) {
      if (m->inputs[k].value != y->target || y->kind == TDM_SYM_IATTR) continue;
      if (y->kind == TDM_SYM_OFFSET) return tdm__fail(TDM_ERR_MALFORMED, "%s: input %u has a symbolic offset", ctx, k);
      if (y->n_terms == 1 && y->terms[0].coef == 1 && y->constant == 0 && m->dims[y->terms[0].dim].axis < 0) {
        m->dims[y->terms[0].dim].input = k; /* this input dim gives the dim's value in a call */
        m->dims[y->terms[0].dim].axis = y->index;
      }
    }
  }
  for (uint32_t d = 0; d < m->n_dims; d++)
    if (m->dims[d].axis < 0 && m->dims[d].state < 0)
      return tdm__fail(TDM_ERR_MALFORMED, "method '%s' dim '%s' is not the size of any input dim, so no call can give it", m->name,
                       m->dims[d].name);
  if (m->n_dims == 0) return TDM_OK;
  /* Verify at the minimum of every dim, and at every corner when there are few dims. */
  size_t bytes = m->n_values * sizeof(tdm_value) + m->n_ops * sizeof(tdm_op) + m->n_iattrs * sizeof(int64_t) + 64;
  uint8_t *mem = tdm__alloc(bytes);
  if (!mem) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory verifying method '%s'", m->name);
  tdm_method b;
  b.values = (tdm_value *)mem;
  b.ops = (tdm_op *)(mem + m->n_values * sizeof(tdm_value));
  int64_t *ia = (int64_t *)(mem + m->n_values * sizeof(tdm_value) + m->n_ops * sizeof(tdm_op));
  const uint32_t corners = m->n_dims <= 4 ? 1u << m->n_dims : 1u;
  s = TDM_OK;
  for (uint32_t c = 0; c < corners && !s; c++) {
    int64_t at[TDM_MAX_DIMS];
    for (uint32_t d = 0; d < m->n_dims; d++) at[d] = (c >> d) & 1 ? m->dims[d].max : m->dims[d].min;
    if ((c + 1 == corners && corners > 1)) continue; /* all at the maximum: verified above */
    s = tdm__bind_method(m, at, &b, ia, true);
    if (s) {
      char msg[512], where[200];
      int n = 0;
      for (uint32_t d = 0; d < m->n_dims && n < (int)sizeof where - 40; d++)
        n += snprintf(where + n, sizeof where - n, "%s%s=%lld", d ? ", " : "", m->dims[d].name, (long long)at[d]);
      snprintf(msg, sizeof msg, "%s", tdm_last_error());
      s = tdm__fail(s, "%s (at %s)", msg, where);
    }
  }
  tdm__free(mem);
  return s;
}

/* Pass 2: read and verify every method into the arena. */
tdm_status tdm__read_methods(tdm_program *p, rd r, carver *cv, const counts *c) {
  uint32_t *refs = carve(cv, c->refs * sizeof(uint32_t));
  int64_t *iattrs = carve(cv, c->iattrs * sizeof(int64_t));
  double *fattrs = carve(cv, c->fattrs * sizeof(double));
  tdm_value *values = carve(cv, c->values * sizeof(tdm_value));
  tdm_io *ios = carve(cv, c->ios * sizeof(tdm_io));
  tdm_op *ops = carve(cv, c->ops * sizeof(tdm_op));
  tdm_dim *dims = carve(cv, c->dims * sizeof(tdm_dim));
  tdm_sym *syms = carve(cv, c->syms * sizeof(tdm_sym));
  tdm_term *terms = carve(cv, c->terms * sizeof(tdm_term));
  const uint64_t cap = tdm__max_declared_bytes();
  char ctx[96];
  tdm_status s;
  for (uint32_t mi = 0; mi < p->n_methods; mi++) {
    tdm_method *m = &p->methods[mi];
    uint32_t name = rd_u32(&r);
    m->n_values = rd_u32(&r);
    m->n_inputs = rd_u32(&r);
    m->n_outputs = rd_u32(&r);
    m->n_ops = rd_u32(&r);
    m->n_dims = rd_u32(&r);
    uint64_t scratch = rd_u64(&r);
    if (p->version < 3 && m->n_dims != 0) return tdm__fail(TDM_ERR_MALFORMED, "method %u: reserved field is not zero", mi);
    snprintf(ctx, sizeof ctx, "method %u", mi);
    if ((s = tdm__string_ref(p, name, &m->name, ctx))) return s;
    for (uint32_t e = 0; e < mi; e++)
      if (strcmp(p->methods[e].name, m->name) == 0) return tdm__fail(TDM_ERR_MALFORMED, "two methods are named '%s'", m->name);
    if (scratch > cap || scratch > SIZE_MAX)
      return tdm__fail(TDM_ERR_LIMIT, "method '%s' declares %llu bytes of scratch, above the cap of %llu", m->name,
                       (unsigned long long)scratch, (unsigned long long)cap);
    m->scratch_size = (size_t)scratch;
    if (m->scratch_size > p->scratch_size) p->scratch_size = m->scratch_size;
    m->values = values;
    values += m->n_values;
    for (uint32_t v = 0; v < m->n_values; v++) {
      tdm_value *val = &m->values[v];
      snprintf(ctx, sizeof ctx, "method '%s' value %u", m->name, v);
      val->dtype = rd_u8(&r);
      const int rank = rd_u8(&r);
      const int region = rd_u8(&r);
      const uint8_t reserved = rd_u8(&r);
      const uint32_t ref = rd_u32(&r);
      const uint64_t off = rd_u64(&r);
      if ((s = tdm__read_shape(&r, val->dtype, rank, &val->shape, &val->numel, &val->nbytes, ctx))) return s;
      if (reserved != 0) return tdm__fail(TDM_ERR_MALFORMED, "%s: reserved byte is not zero", ctx);
      const size_t es = tdm_dtype_size(val->dtype);
      if (off % es) return tdm__fail(TDM_ERR_MALFORMED, "%s: offset %llu is not aligned to its element size", ctx, (unsigned long long)off);
      val->region = (tdm_region)region;
      val->ref = ref;
      if (TDM_DTYPE_CONST_ONLY(val->dtype) && region != TDM_REGION_CONST)
        return tdm__fail(TDM_ERR_MALFORMED, "%s: dtype %s is for constants only", ctx, tdm_dtype_name(val->dtype));
      if (region == TDM_REGION_SCRATCH) {
        if (ref != 0) return tdm__fail(TDM_ERR_MALFORMED, "%s: a scratch value has a reference", ctx);
        if (!tdm__range_inside(off, val->nbytes, m->scratch_size))
          return tdm__fail(TDM_ERR_MALFORMED, "%s: bytes [%llu, +%zu) lie outside the method's scratch of %zu bytes", ctx,
                           (unsigned long long)off, val->nbytes, m->scratch_size);
        val->offset = (size_t)off;
      } else if (region == TDM_REGION_CONST) {
        if (ref >= p->n_consts) return tdm__fail(TDM_ERR_MALFORMED, "%s: constant %u does not exist (%u constants)", ctx, ref, p->n_consts);
        const tdm_const *k = &p->consts[ref];
        if (k->dtype != val->dtype || !tdm__range_inside(off, val->nbytes, k->nbytes))
          return tdm__fail(TDM_ERR_MALFORMED, "%s: does not fit inside constant '%s'", ctx, k->name);
        val->offset = k->data_offset + (size_t)off;
      } else if (region == TDM_REGION_STATE) {
        if (ref >= p->n_states) return tdm__fail(TDM_ERR_MALFORMED, "%s: state %u does not exist (%u states)", ctx, ref, p->n_states);
        const tdm_state *st = &p->states[ref];
        if (st->dtype != val->dtype || !tdm__range_inside(off, val->nbytes, st->nbytes))
          return tdm__fail(TDM_ERR_MALFORMED, "%s: does not fit inside state '%s'", ctx, st->name);
        val->offset = st->offset + (size_t)off;
      } else {
        return tdm__fail(TDM_ERR_MALFORMED, "%s: unknown region %d", ctx, region);
      }
    }
    for (int io = 0; io < 2; io++) {
      const uint32_t n = io ? m->n_outputs : m->n_inputs;
      tdm_io *list = ios;
      ios += n;
      if (io) m->outputs = list;
      else m->inputs = list;
      for (uint32_t i = 0; i < n; i++) {
        uint32_t v = rd_u32(&r), nm = rd_u32(&r);
        snprintf(ctx, sizeof ctx, "method '%s' %s %u", m->name, io ? "output" : "input", i);
        if (r.bad) return tdm__truncated(&r);
        if ((s = tdm__string_ref(p, nm, &list[i].name, ctx))) return s;
        if (v >= m->n_values) return tdm__fail(TDM_ERR_MALFORMED, "%s: value %u is out of range", ctx, v);
        list[i].value = v;
        const tdm_value *val = &m->values[v];
        if (TDM_DTYPE_CONST_ONLY(val->dtype))
          return tdm__fail(TDM_ERR_MALFORMED, "%s: dtype %s is for constants only, never an input or output", ctx,
                           tdm_dtype_name(val->dtype));
        if (!io) {
          if (val->region != TDM_REGION_SCRATCH) return tdm__fail(TDM_ERR_MALFORMED, "%s: inputs must live in scratch", ctx);
          for (uint32_t e = 0; e < i; e++) {
            const tdm_value *o = &m->values[list[e].value];
            if (tdm__ranges_overlap(o->offset, o->nbytes, val->offset, val->nbytes))
              return tdm__fail(TDM_ERR_MALFORMED, "%s overlaps input %u", ctx, e);
          }
        }
      }
    }
    m->ops = ops;
    ops += m->n_ops;
    m->iattrs = iattrs;
    int64_t first_state_write = -1;
    for (uint32_t k = 0; k < m->n_ops; k++) {
      tdm_op *op = &m->ops[k];
      const uint32_t nm = rd_u32(&r);
      op->n_in = rd_u16(&r);
      op->n_out = rd_u16(&r);
      op->n_iattr = rd_u16(&r);
      op->n_fattr = rd_u16(&r);
      snprintf(ctx, sizeof ctx, "method '%s' op %u", m->name, k);
      const char *opname = NULL;
      if ((s = tdm__string_ref(p, nm, &opname, ctx))) return s;
      op->def = tdm__find_op(opname);
      if (!op->def)
        return tdm__fail(TDM_ERR_UNKNOWN_OP,
                         "method '%s' op %u: unknown operator '%s' (this runtime is older than the exporter, or the file is corrupt)",
                         m->name, k, opname);
      op->in = refs;
      for (uint32_t j = 0; j < op->n_in; j++) *refs++ = rd_u32(&r);
      op->out = refs;
      for (uint32_t j = 0; j < op->n_out; j++) *refs++ = rd_u32(&r);
      op->iattr = iattrs;
      for (uint32_t j = 0; j < op->n_iattr; j++) *iattrs++ = (int64_t)rd_u64(&r);
      op->fattr = fattrs;
      for (uint32_t j = 0; j < op->n_fattr; j++) {
        uint64_t bits = rd_u64(&r);
        memcpy(fattrs++, &bits, 8);
      }
      if (r.bad) return tdm__truncated(&r);
      if ((s = tdm__verify_op(m, k, &first_state_write))) return s;
      if (op->def->can_fail) m->fail_end = k + 1;
    }
    m->n_iattrs = (size_t)(iattrs - m->iattrs);
    if ((s = tdm__check_blocks(m)) || (s = tdm__check_defined(m))) return s;
    if (p->version >= 3) {
      m->dims = dims;
      dims += m->n_dims;
      m->syms = syms;
      if ((s = read_dims(p, m, &r, &terms))) return s;
      syms += m->n_syms;
    }
  }
  return TDM_OK;
}

static bool same_io(const tdm_method *a, const tdm_io *x, const tdm_method *b, const tdm_io *y) {
  const tdm_value *u = &a->values[x->value], *v = &b->values[y->value];
  if (strcmp(x->name, y->name) != 0 || u->dtype != v->dtype || u->shape.rank != v->shape.rank) return false;
  for (int d = 0; d < u->shape.rank; d++)
    if (u->shape.dims[d] != v->shape.dims[d]) return false;
  return true;
}

tdm_status tdm__link_versions(tdm_program *p) {
  for (uint32_t i = 0; i < p->n_methods; i++) p->methods[i].next_version = UINT32_MAX;
  for (uint32_t i = 0; i < p->n_methods; i++) {
    tdm_method *v = &p->methods[i];
    const char *hash = strchr(v->name, '#');
    if (!hash) continue;
    const size_t n = (size_t)(hash - v->name);
    bool digits = hash[1] != 0;
    for (const char *c = hash + 1; *c; c++) digits = digits && *c >= '0' && *c <= '9';
    tdm_method *base = NULL;
    for (uint32_t j = 0; j < p->n_methods && digits; j++) {
      const tdm_method *b = &p->methods[j];
      if (j != i && strlen(b->name) == n && strncmp(b->name, v->name, n) == 0) base = &p->methods[j];
    }
    if (!base) return tdm__fail(TDM_ERR_MALFORMED, "method '%s' is named as a version ('base#k') of no method of the program", v->name);
    /* a version gives the base's outputs, or none (a branch returning None) */
    bool same = v->n_inputs == base->n_inputs && (v->n_outputs == base->n_outputs || v->n_outputs == 0) && v->n_dims == base->n_dims;
    for (uint32_t k = 0; same && k < v->n_inputs; k++) same = same_io(v, &v->inputs[k], base, &base->inputs[k]);
    for (uint32_t k = 0; same && k < v->n_outputs; k++) same = same_io(v, &v->outputs[k], base, &base->outputs[k]);
    for (uint32_t d = 0; same && d < v->n_dims; d++)
      same = strcmp(v->dims[d].name, base->dims[d].name) == 0 && v->dims[d].min == base->dims[d].min && v->dims[d].max == base->dims[d].max;
    if (!same)
      return tdm__fail(TDM_ERR_MALFORMED,
                       "method '%s' is a version of '%s' but does not take the same inputs and dims and give the same outputs (or none)",
                       v->name, base->name);
    v->is_version = true;
    tdm_method *last = base;
    while (last->next_version != UINT32_MAX) last = &p->methods[last->next_version];
    last->next_version = i;
  }
  return TDM_OK;
}
