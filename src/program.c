/* program.c — a program's lifetime: read and verified from the file's bytes (reader.c), then
 * prepared for the CPU kernels by each op's prepare hook (ops.h: packed or transformed weights in
 * memory the CPU backend owns; the file's bytes stay as they are), and freed with what the hooks
 * built. */
#include "ops.h"
#include "util.h"

#include <string.h>

tdm_status tdm_program_load_owned(void *data, size_t size, tdm_program **out) {
  if (!out || (!data && size)) {
    tdm__free(data);
    return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_program_load: NULL argument");
  }
  *out = NULL;
  tdm_program *p = tdm__calloc(sizeof *p);
  if (!p) {
    tdm__free(data);
    return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory allocating a program");
  }
  p->file = data;
  p->file_size = size;
  tdm_status s = tdm__read_program(p);
  if (s) {
    tdm_program_free(p);
    return s;
  }
  tdm__prepare_ops(p);
  *out = p;
  return TDM_OK;
}

tdm_status tdm_program_load(const void *data, size_t size, tdm_program **out) {
  if (!out || (!data && size)) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "tdm_program_load: NULL argument");
  *out = NULL;
  void *copy = tdm__alloc(size);
  if (!copy) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "out of memory copying a %zu-byte file", size);
  if (size) memcpy(copy, data, size);
  return tdm_program_load_owned(copy, size, out);
}

void tdm_program_free(tdm_program *p) {
  if (!p) return;
  tdm__release_ops(p);
  tdm__free(p->arena);
  tdm__free(p->file);
  tdm__free(p);
}
