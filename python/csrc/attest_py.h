/* attest_py: the C ABI of libattest_py.so, the native half of the Python package `attest`.
 *
 * Plain C so that one shared library serves every Python version through ctypes (the GPU
 * machine's Python is 3.12, the build machines' 3.11). Kernels cross as the structs of the plugin
 * ABI (kernels/plugin/include/attest/plugin.h, version 1): a Python callable becomes an
 * attest_plugin_kernel whose `run` is a ctypes function pointer, registered in the C++ kernel
 * registry as `py.<name>`, so the C++ gate runs every check on it and computes every verdict.
 * Requests and replies are JSON text (one entry point, attest_py_call), which keeps the ctypes
 * surface to five functions.
 *
 * Return codes: 0 success (for a gate: every verdict passed or unsupported), 1 a check failed,
 * 2 an input error (the reply holds {"error": "<one line naming the thing and the defect>"}).
 */
#ifndef ATTEST_PY_H
#define ATTEST_PY_H

#include "attest/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTEST_PY_ABI_VERSION 1
#define ATTEST_PY_API __attribute__((visibility("default")))

/* ATTEST_PY_ABI_VERSION; the Python side refuses a library of another version. */
ATTEST_PY_API int attest_py_abi_version(void);

/* Registers the kernel `py.<name>` ([A-Za-z0-9_.-]+), or rebinds it when it exists (the registry
 * cannot remove kernels; a rebind replaces the description and the callback). The description is
 * copied (strings and arrays included); `kernel->context` is passed back to `run`. Memory must be
 * HOST: a Python callable on a GPU gets host tensors and copies them itself. Returns 0, or 2 with
 * the message in *reply (free it with attest_py_free). */
ATTEST_PY_API int attest_py_register(const char* name, const attest_plugin_kernel* kernel, char** reply);

/* One request as JSON {"op": "gate" | "run_case" | "list" | "merge" | "ladder" | "pair", ...}
 * (python/attest/_native.py documents every op's fields). *reply: a JSON object, malloc'd; free
 * it with attest_py_free. */
ATTEST_PY_API int attest_py_call(const char* request_json, char** reply);

/* Runs a registered C++ kernel (e.g. cpu.tiled.bf16, mutant.no_rescale) on caller buffers:
 * problem and recipe strings, args->q/k/v/out/lse float32 host tensors of the registry's logical
 * shapes with any strides (args->problem and args->recipe are ignored: the strings rule). The
 * inputs are copied into attest tensors with the same strides, the kernel writes attest tensors,
 * and the logical elements of out (and lse) are copied back: so an out-of-bounds write of the
 * kernel never reaches the caller's memory. Returns 0, or 2 with the message in *reply. */
ATTEST_PY_API int attest_py_kernel_run(const char* kernel, const char* recipe, const char* problem,
                                       const attest_plugin_run_args* args, char** reply);

ATTEST_PY_API void attest_py_free(char* p);

#ifdef __cplusplus
}
#endif

#endif /* ATTEST_PY_H */
