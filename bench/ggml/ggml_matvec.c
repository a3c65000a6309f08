// ggml's matrix-vector product on the work `cachet bench kernels` measures: copies of one
// weight matrix, together over 1 GiB, each multiplied by one f32 vector in turn, so the
// weights stream from memory and not from the caches. Built against a ggml checkout by
// bench/ggml/run.sh (ggml is not part of cachet); prints, per call:
//   ggml matvec Q4_K 4096x14336: 11.9 GB/s (fastest of 8 passes; mean 11.7)
// Usage: ggml_matvec TYPE ROWS COLS THREADS [BUFFER]
//   TYPE as ggml names it (q4_K, q8_0, bf16, ...); BUFFER names the weights' buffer type (CPU,
//   AMX, CPU_REPACK, ...) where the default (llama.cpp's choice) is not wanted.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: %s TYPE ROWS COLS THREADS [BUFFER]\n", argv[0]);
    return 2;
  }
  const int rows = atoi(argv[2]), cols = atoi(argv[3]), threads = atoi(argv[4]);
  enum ggml_type type = GGML_TYPE_COUNT;
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* name = ggml_get_type_traits((enum ggml_type)t)->type_name;
    if (name && strcmp(name, argv[1]) == 0) type = (enum ggml_type)t;
  }
  if (type == GGML_TYPE_COUNT || rows <= 0 || cols <= 0 || threads <= 0) {
    fprintf(stderr, "ggml_matvec: bad type or shape: %s %s %s %s\n", argv[1], argv[2], argv[3],
            argv[4]);
    return 2;
  }
  const size_t bytes = ggml_row_size(type, cols) * (size_t)rows;
  const int copies = (int)(((size_t)1 << 30) / bytes) + 2;

  ggml_backend_t backend = ggml_backend_cpu_init();
  ggml_backend_cpu_set_n_threads(backend, threads);
  ggml_backend_dev_t dev = ggml_backend_get_device(backend);
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);

  // The weights' buffer type as llama.cpp chooses it: the first of the CPU backend's extra
  // types (AMX, repacked layouts) that supports this matrix product, else plain CPU memory.
  ggml_backend_buffer_type_t buft = ggml_backend_cpu_buffer_type();
  ggml_backend_dev_get_extra_bufts_t get_extra =
      (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(
          reg, "ggml_backend_dev_get_extra_bufts");
  const char* want = argc == 6 ? argv[5] : NULL;
  for (ggml_backend_buffer_type_t* e = get_extra ? get_extra(dev) : NULL; e && *e; ++e) {
    if (want && strcmp(want, ggml_backend_buft_name(*e)) != 0) continue;
    struct ggml_init_params probe = {4 * ggml_tensor_overhead(), NULL, true};
    struct ggml_context* pctx = ggml_init(probe);
    struct ggml_tensor* w = ggml_new_tensor_2d(pctx, type, cols, rows);
    struct ggml_tensor* op = ggml_mul_mat(pctx, w, ggml_new_tensor_1d(pctx, GGML_TYPE_F32, cols));
    ggml_backend_buffer_t dummy = ggml_backend_buft_alloc_buffer(*e, 0);
    w->buffer = dummy;
    const bool ok = ggml_backend_dev_supports_op(dev, op);
    ggml_backend_buffer_free(dummy);
    ggml_free(pctx);
    if (ok) {
      buft = *e;
      break;
    }
  }

  if (want && strcmp(want, ggml_backend_buft_name(buft)) != 0) {
    fprintf(stderr, "ggml_matvec: buffer type %s is not there or does not take %s\n", want,
            argv[1]);
    return 2;
  }
  struct ggml_init_params wparams = {(size_t)(copies + 1) * ggml_tensor_overhead(), NULL, true};
  struct ggml_context* wctx = ggml_init(wparams);
  struct ggml_tensor** w = malloc((size_t)copies * sizeof *w);
  for (int c = 0; c < copies; ++c) w[c] = ggml_new_tensor_2d(wctx, type, cols, rows);
  ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
  if (!wbuf) {
    fprintf(stderr, "ggml_matvec: out of memory\n");
    return 1;
  }
  {  // huge pages, as cachet asks for its weights
    uintptr_t b = (uintptr_t)ggml_backend_buffer_get_base(wbuf);
    const uintptr_t e = b + ggml_backend_buffer_get_size(wbuf);
    b = (b + ((uintptr_t)2 << 20) - 1) & ~(((uintptr_t)2 << 20) - 1);
    if (e > b) madvise((void*)b, e - b, MADV_HUGEPAGE);
  }
  float* src = malloc((size_t)rows * (size_t)cols * sizeof(float));
  void* packed = malloc(bytes);
  srand(7);
  for (size_t i = 0; i < (size_t)rows * (size_t)cols; ++i)
    src[i] = (float)rand() / (float)RAND_MAX - 0.5f;
  if (ggml_is_quantized(type))
    ggml_quantize_chunk(type, src, packed, 0, rows, cols, NULL);
  else if (type == GGML_TYPE_BF16)
    ggml_fp32_to_bf16_row(src, packed, (int64_t)rows * cols);
  else if (type == GGML_TYPE_F16)
    ggml_fp32_to_fp16_row(src, packed, (int64_t)rows * cols);
  else
    memcpy(packed, src, bytes);
  for (int c = 0; c < copies; ++c) ggml_backend_tensor_set(w[c], packed, 0, bytes);

  struct ggml_init_params gparams = {(size_t)(copies + 8) * ggml_tensor_overhead() +
                                         ggml_graph_overhead_custom((size_t)copies + 8, false),
                                     NULL, true};
  struct ggml_context* gctx = ggml_init(gparams);
  struct ggml_tensor* x = ggml_new_tensor_1d(gctx, GGML_TYPE_F32, cols);
  struct ggml_cgraph* graph = ggml_new_graph_custom(gctx, (size_t)copies + 8, false);
  for (int c = 0; c < copies; ++c) ggml_build_forward_expand(graph, ggml_mul_mat(gctx, w[c], x));
  ggml_backend_buffer_t gbuf = ggml_backend_alloc_ctx_tensors(gctx, backend);
  ggml_backend_tensor_set(x, src, 0, (size_t)cols * sizeof(float));
  free(src);
  free(packed);

  if (ggml_backend_graph_compute(backend, graph) != GGML_STATUS_SUCCESS) {  // warm-up
    fprintf(stderr, "ggml_matvec: graph compute failed\n");
    return 1;
  }
  const int passes = 8;
  double best = 0, sum = 0;
  for (int p = 0; p < passes; ++p) {
    const double t0 = now_s();
    ggml_backend_graph_compute(backend, graph);
    const double gbs = (double)bytes * copies / (now_s() - t0) / 1e9;
    sum += gbs;
    if (gbs > best) best = gbs;
  }
  char name[16];
  snprintf(name, sizeof name, "%s", argv[1]);
  for (char* p = name; *p; ++p)
    if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
  printf("ggml matvec %s %dx%d: %.1f GB/s (fastest of %d passes; mean %.1f; weights in %s)\n", name,
         rows, cols, best, passes, sum / passes, ggml_backend_buft_name(buft));
  ggml_backend_buffer_free(gbuf);
  ggml_backend_buffer_free(wbuf);
  ggml_free(gctx);
  ggml_free(wctx);
  free(w);
  ggml_backend_free(backend);
  return 0;
}
