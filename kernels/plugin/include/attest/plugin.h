/* attest plugin ABI, version 1: how a shared library hands attention kernels to attest.
 *
 * Plain C (C99 and C++), no C++ type crosses it, so a kernel library built with any compiler,
 * standard library or runtime (C, C++, HIP, CUDA) can be loaded by `attest gate --plugin lib.so`.
 * The library exports one function, attest_plugin_query, returning a static description of its
 * kernels: name, backend, memory kind, recipes (recipe strings of core/recipe.hpp or named
 * recipes such as "f32", "bf16", "sage_int8_fp8_perblock"), capabilities (head dims, masks,
 * layouts, input dtypes, feature flags) and a run function called on given buffers and a stream.
 * attest registers each kernel as `plugin.<plugin name>.<kernel name>` and runs every gate check
 * on it. docs/plugin.md has a complete example.
 *
 * Compatibility rules:
 * - abi_version must equal ATTEST_PLUGIN_ABI_VERSION: a change of meaning bumps it.
 * - Every struct starts with struct_size (sizeof as the writer compiled it). Version 1 only ever
 *   appends fields at the end; a reader uses a field only when struct_size covers it, and the
 *   loader refuses a struct smaller than its version-1 size (built against a broken header).
 * - Everything the plugin returns from attest_plugin_query (strings, arrays, structs) must stay
 *   valid and unchanged until the process exits: attest never unloads a plugin.
 * - Functions the plugin exports or points to must not let a C++ exception or a longjmp escape.
 */
#ifndef ATTEST_PLUGIN_H
#define ATTEST_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTEST_PLUGIN_ABI_VERSION 1u
/* The one symbol the loader looks up. */
#define ATTEST_PLUGIN_QUERY_SYMBOL "attest_plugin_query"
#define ATTEST_PLUGIN_MAX_RANK 8

#if defined(_WIN32)
#define ATTEST_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ATTEST_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Element types of tensors (the values of attest::DType, in its order). */
enum attest_plugin_dtype {
  ATTEST_PLUGIN_DTYPE_F64 = 0,
  ATTEST_PLUGIN_DTYPE_F32 = 1,
  ATTEST_PLUGIN_DTYPE_F16 = 2,
  ATTEST_PLUGIN_DTYPE_BF16 = 3,
  ATTEST_PLUGIN_DTYPE_FP8_E4M3FN = 4,
  ATTEST_PLUGIN_DTYPE_FP8_E5M2 = 5,
  ATTEST_PLUGIN_DTYPE_I8 = 6,
  ATTEST_PLUGIN_DTYPE_U8 = 7,
  ATTEST_PLUGIN_DTYPE_I16 = 8,
  ATTEST_PLUGIN_DTYPE_U16 = 9,
  ATTEST_PLUGIN_DTYPE_I32 = 10,
  ATTEST_PLUGIN_DTYPE_I64 = 11,
  ATTEST_PLUGIN_DTYPE_B8 = 12
};

/* Masks (attest::Mask). With S query and T key tokens of one batch element, query i sees keys
 * [0, hi): NONE hi = T; CAUSAL_TL hi = min(T, i + 1); CAUSAL_BR hi = min(T, i + 1 + T - S)
 * (hi <= 0: the row sees nothing and must give out 0, lse -inf). */
enum attest_plugin_mask { ATTEST_PLUGIN_MASK_NONE = 0, ATTEST_PLUGIN_MASK_CAUSAL_TL = 1, ATTEST_PLUGIN_MASK_CAUSAL_BR = 2 };

/* Layouts (attest::Layout). They differ only in strides: a kernel that reads the strides of
 * attest_plugin_tensor handles all of them. */
enum attest_plugin_layout {
  ATTEST_PLUGIN_LAYOUT_BSHD = 0,
  ATTEST_PLUGIN_LAYOUT_BHSD = 1,
  ATTEST_PLUGIN_LAYOUT_PACKED_QKV = 2,
  ATTEST_PLUGIN_LAYOUT_STRIDED = 3
};

/* Where a kernel's buffers live. HOST: host pointers, stream NULL (CPU kernels). DEVICE:
 * pointers in GPU memory and a stream (cudaStream_t / hipStream_t as void*) to enqueue on;
 * attest waits for the stream after run returns. */
enum attest_plugin_memory { ATTEST_PLUGIN_MEMORY_HOST = 0, ATTEST_PLUGIN_MEMORY_DEVICE = 1 };

/* attest_plugin_kernel.flags (attest::kernels::Capabilities). */
#define ATTEST_PLUGIN_CAP_GQA (1u << 0)              /* heads_kv < heads_q */
#define ATTEST_PLUGIN_CAP_CROSS (1u << 1)            /* seqlen_kv != seqlen_q */
#define ATTEST_PLUGIN_CAP_RAGGED (1u << 2)           /* cu_seqlens (varlen) */
#define ATTEST_PLUGIN_CAP_HEAD_DIM_V (1u << 3)       /* head_dim_v != head_dim */
#define ATTEST_PLUGIN_CAP_LSE (1u << 4)              /* writes the float32 LSE when asked */
#define ATTEST_PLUGIN_CAP_GRAPH_CAPTURABLE (1u << 5) /* DEVICE kernels: no sync/alloc inside run */
#define ATTEST_PLUGIN_CAP_DETERMINISTIC (1u << 6)    /* same bits run to run */
#define ATTEST_PLUGIN_CAP_BITWISE (1u << 7)          /* promises bits == attest's recipe emulator */
#define ATTEST_PLUGIN_CAP_THREAD_SAFE (1u << 8)      /* run may be called from several threads at once;
                                                        without it attest serialises the plugin's calls */
#define ATTEST_PLUGIN_CAP_ALL ((1u << 9) - 1u)

/* attest_plugin_kernel.declares: legitimate properties the kernel declares (attest reports them
 * beside the verdicts they explain). */
#define ATTEST_PLUGIN_DECLARE_FTZ (1u << 0)             /* subnormal outputs are flushed to zero */
#define ATTEST_PLUGIN_DECLARE_NO_CAUSAL_CROSS (1u << 1) /* causal masks only with seqlen_q == seqlen_kv */
#define ATTEST_PLUGIN_DECLARE_SUPPORTS_LIMITS (1u << 2) /* supports() states declared limits: the cases it
                                                           refuses are UNSUPPORTED (outside the declaration),
                                                           not failed refusals; call-time refusals still fail */
#define ATTEST_PLUGIN_DECLARE_ALL ((1u << 3) - 1u)

/* Return codes of attest_plugin_run_fn besides 0 (success). */
#define ATTEST_PLUGIN_RUN_REFUSED 3 /* refuses this admitted problem at call time; message = the reason
                                       (e.g. "No available kernel"): one failed refusal row, the case's
                                       other checks UNSUPPORTED */
#define ATTEST_PLUGIN_RUN_FAULT 4   /* the kernel faulted (sticky device error, out of memory, hang);
                                       message = the error text: the case's verdict is fault */

/* A strided tensor view. data points at element (0, ..., 0); strides are in elements. */
typedef struct attest_plugin_tensor {
  uint32_t struct_size;
  uint32_t dtype; /* enum attest_plugin_dtype */
  int32_t rank;
  int32_t reserved; /* 0 */
  void* data;
  int64_t shape[ATTEST_PLUGIN_MAX_RANK];
  int64_t strides[ATTEST_PLUGIN_MAX_RANK];
} attest_plugin_tensor;

/* The attention problem (attest::Problem). */
typedef struct attest_plugin_problem {
  uint32_t struct_size;
  uint32_t mask;   /* enum attest_plugin_mask */
  uint32_t layout; /* enum attest_plugin_layout */
  uint32_t dtype;  /* enum attest_plugin_dtype: the input dtype the problem names */
  int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_kv, head_dim, head_dim_v;
  int64_t pad;          /* extra elements per head row (layout STRIDED) */
  double softmax_scale; /* resolved: the problem's scale or 1/sqrt(head_dim) */
  /* Ragged (varlen) batches: batch+1 cumulative token starts from 0, or both NULL. seqlen_q and
   * seqlen_kv are then the largest lengths. Host memory. */
  const int64_t* cu_seqlens_q;
  const int64_t* cu_seqlens_kv;
  const char* text; /* the problem string, e.g. "b2h4k2s80t150d32:mask=causal_br" */
  /* DEVICE kernels: the same cumulative starts in device memory (NULL for HOST kernels). */
  const int64_t* cu_seqlens_q_device;
  const int64_t* cu_seqlens_kv_device;
} attest_plugin_problem;

/* One forward pass. Inputs hold float32 values in logical order (q [B,S,H,D], k [B,T,Hkv,D],
 * v [B,T,Hkv,Dv]; ragged: [1,total,...]) with the strides of the problem's layout; the kernel
 * applies its recipe's quantization itself. out is float32 [B,S,H,Dv] (ragged [1,total_q,H,Dv]),
 * possibly strided and prefilled with poison: write every element and nothing outside it. lse is
 * float32 [B,H,S] (ragged [1,H,total_q]), natural log of the sum of exp(scaled logits), or NULL. */
typedef struct attest_plugin_run_args {
  uint32_t struct_size;
  uint32_t reserved; /* 0 */
  const attest_plugin_problem* problem;
  const char* recipe;       /* the full recipe string (core/recipe.hpp) */
  const char* recipe_label; /* as listed in attest_plugin_kernel.recipes (normalised to the named label) */
  const char* config;       /* one of attest_plugin_kernel.configs; "" = default */
  const attest_plugin_tensor* q;
  const attest_plugin_tensor* k;
  const attest_plugin_tensor* v;
  const attest_plugin_tensor* out;
  const attest_plugin_tensor* lse; /* NULL when not requested */
  /* DEVICE kernels: the stream to enqueue on (this loader passes the default stream, whose
   * handle is NULL, and synchronises after run returns); HOST kernels: NULL. */
  void* stream;
} attest_plugin_run_args;

/* Returns 0 on success. On failure returns non-zero and writes a one-line, NUL-terminated
 * message of at most message_size bytes: ATTEST_PLUGIN_RUN_REFUSED (a refusal at call time),
 * ATTEST_PLUGIN_RUN_FAULT (a fault), any other code is the case's error verdict. */
typedef int (*attest_plugin_run_fn)(void* context, const attest_plugin_run_args* args, char* message,
                                    size_t message_size);
/* Optional kernel-specific limits beyond the declared capabilities (attest checks those first).
 * Returns 1 when supported, else 0 and a one-line reason in `reason`. */
typedef int (*attest_plugin_supports_fn)(void* context, const attest_plugin_problem* problem, const char* recipe,
                                         char* reason, size_t reason_size);

typedef struct attest_plugin_kernel {
  uint32_t struct_size;
  uint32_t memory;     /* enum attest_plugin_memory */
  const char* name;    /* [A-Za-z0-9_.-]+, unique in the plugin */
  const char* backend; /* "cpu", "cuda", "hip", ... (reported as "plugin:<backend>") */
  const char* const* recipes; /* named recipe labels or full recipe strings; at least one */
  uint32_t n_recipes;
  uint32_t n_configs;
  const char* const* configs; /* extra tuning configs / call paths besides the default "" whose
                                 bits must equal the default's; NULL/0 = none */
  const int64_t* head_dims;   /* supported head_dim values; NULL/0 = any */
  uint32_t n_head_dims;
  uint32_t masks;   /* bit (1u << mask) per supported enum attest_plugin_mask */
  uint32_t layouts; /* bit (1u << layout) per supported enum attest_plugin_layout */
  uint32_t dtypes;  /* bit (1u << dtype) per supported problem dtype; 0 = any */
  uint32_t flags;   /* ATTEST_PLUGIN_CAP_* */
  uint32_t reserved; /* 0 */
  attest_plugin_supports_fn supports; /* optional (NULL) */
  attest_plugin_run_fn run;           /* required */
  void* context;                      /* passed back to supports and run */
  /* Appended in ABI version 1 (read only when struct_size covers them; absent = 0). */
  uint32_t declares;  /* ATTEST_PLUGIN_DECLARE_* */
  uint32_t row_align; /* every non-innermost stride and start offset of q, k, v and out (in
                         elements) must be a multiple of this; 0 or 1 = any */
  /* Known defects accepted knowingly: "check=why" lines ('\n'-separated), or NULL. A failure of
   * that check becomes the verdict `accepted`, shown with the reason (docs/gate.md). */
  const char* accepts;
} attest_plugin_kernel;

/* The size of attest_plugin_kernel before `declares` was appended: the smallest struct_size the
 * loader accepts. */
#define ATTEST_PLUGIN_KERNEL_V1_MIN_SIZE offsetof(attest_plugin_kernel, declares)

typedef struct attest_plugin_info {
  uint32_t struct_size;
  uint32_t abi_version; /* ATTEST_PLUGIN_ABI_VERSION the plugin was built with */
  const char* name;     /* [A-Za-z0-9_-]+: kernels register as plugin.<name>.<kernel name> */
  const char* version;  /* free text, reported in messages */
  const attest_plugin_kernel* const* kernels;
  uint32_t n_kernels;
  uint32_t reserved; /* 0 */
} attest_plugin_info;

/* The entry point. host_abi_version is the loader's ATTEST_PLUGIN_ABI_VERSION; return the
 * (static) description, or NULL to refuse the host. */
typedef const attest_plugin_info* (*attest_plugin_query_fn)(uint32_t host_abi_version);
ATTEST_PLUGIN_EXPORT const attest_plugin_info* attest_plugin_query(uint32_t host_abi_version);

#ifdef __cplusplus
}
#endif

#endif /* ATTEST_PLUGIN_H */
