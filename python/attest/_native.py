"""ctypes view of libattest_py.so (python/csrc/attest_py.h) and of the plugin ABI structs it
reuses (kernels/plugin/include/attest/plugin.h, version 1).

Requests to the library are JSON objects; `call(op, **fields)` sends one and returns the reply:

  gate      kernel, profile, cases | cases_text, recipe_glob, check, jobs, reruns, tolerances,
            oracles: host | device, sample_macs
  run_case  descriptor, reruns, tolerances, oracles, sample_macs
  list      what: kernels | recipes | checks | cases | profiles
  build     {gpu_backend}: whether the library has the device engine
  merge     kernel, recipe, problem, dist, seed, shards, tolerances
  ladder    kernel, recipe, lengths, heads, heads_kv, head_dim, rows, blocks, slope_margin, dist, seed
  pair      kernel_a, kernel_b, contract, profile, cases | cases_text, tolerances
"""
from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path
from typing import Optional

ABI_VERSION = 1
MAX_RANK = 8

DTYPE = {"f64": 0, "f32": 1, "f16": 2, "bf16": 3}
MASKS = {"none": 0, "causal_tl": 1, "causal_br": 2}
LAYOUTS = {"bshd": 0, "bhsd": 1, "packed_qkv": 2, "strided": 3}

CAP_GQA = 1 << 0
CAP_CROSS = 1 << 1
CAP_RAGGED = 1 << 2
CAP_HEAD_DIM_V = 1 << 3
CAP_LSE = 1 << 4
CAP_GRAPH_CAPTURABLE = 1 << 5
CAP_DETERMINISTIC = 1 << 6
CAP_BITWISE = 1 << 7
CAP_THREAD_SAFE = 1 << 8
# attest_plugin_kernel.declares: properties a kernel declares about itself (plugin.h)
DECLARE_FTZ = 1 << 0              # flushes subnormal outputs to zero
DECLARE_NO_CAUSAL_CROSS = 1 << 1  # refuses causal masks with seqlen_q != seqlen_kv
DECLARE_SUPPORTS_LIMITS = 1 << 2  # supports() states declared limits (its refusals are UNSUPPORTED)
# run() return codes besides 0 (success) and 1 (error): plugin.h
RUN_ERROR = 1
RUN_REFUSED = 3  # the kernel refuses this problem at call time (message: its reason)
RUN_FAULT = 4    # the kernel faulted (sticky device error, crashed worker, hang, out of memory)


class Tensor(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("dtype", ctypes.c_uint32),
        ("rank", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("data", ctypes.c_void_p),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("strides", ctypes.c_int64 * MAX_RANK),
    ]


class Problem(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("mask", ctypes.c_uint32),
        ("layout", ctypes.c_uint32),
        ("dtype", ctypes.c_uint32),
        ("batch", ctypes.c_int64),
        ("heads_q", ctypes.c_int64),
        ("heads_kv", ctypes.c_int64),
        ("seqlen_q", ctypes.c_int64),
        ("seqlen_kv", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("head_dim_v", ctypes.c_int64),
        ("pad", ctypes.c_int64),
        ("softmax_scale", ctypes.c_double),
        ("cu_seqlens_q", ctypes.POINTER(ctypes.c_int64)),
        ("cu_seqlens_kv", ctypes.POINTER(ctypes.c_int64)),
        ("text", ctypes.c_char_p),
        ("cu_seqlens_q_device", ctypes.POINTER(ctypes.c_int64)),
        ("cu_seqlens_kv_device", ctypes.POINTER(ctypes.c_int64)),
    ]


class RunArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("problem", ctypes.POINTER(Problem)),
        ("recipe", ctypes.c_char_p),
        ("recipe_label", ctypes.c_char_p),
        ("config", ctypes.c_char_p),
        ("q", ctypes.POINTER(Tensor)),
        ("k", ctypes.POINTER(Tensor)),
        ("v", ctypes.POINTER(Tensor)),
        ("out", ctypes.POINTER(Tensor)),
        ("lse", ctypes.POINTER(Tensor)),
        ("stream", ctypes.c_void_p),
    ]


RUN_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(RunArgs), ctypes.c_void_p, ctypes.c_size_t)
SUPPORTS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(Problem), ctypes.c_char_p, ctypes.c_void_p,
                               ctypes.c_size_t)


class KernelDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("memory", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("backend", ctypes.c_char_p),
        ("recipes", ctypes.POINTER(ctypes.c_char_p)),
        ("n_recipes", ctypes.c_uint32),
        ("n_configs", ctypes.c_uint32),
        ("configs", ctypes.POINTER(ctypes.c_char_p)),
        ("head_dims", ctypes.POINTER(ctypes.c_int64)),
        ("n_head_dims", ctypes.c_uint32),
        ("masks", ctypes.c_uint32),
        ("layouts", ctypes.c_uint32),
        ("dtypes", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("supports", SUPPORTS_FN),
        ("run", RUN_FN),
        ("context", ctypes.c_void_p),
        # appended to ABI version 1 (read by attest when struct_size covers them)
        ("declares", ctypes.c_uint32),   # DECLARE_* bits
        ("row_align", ctypes.c_uint32),  # elements: strides and offsets a multiple of it; 0/1 = any
        ("accepts", ctypes.c_char_p),    # "check=why" lines: failures of these checks accepted knowingly
    ]


class AttestError(Exception):
    """An input error reported by attest (one line naming the thing and the defect)."""


class Unsupported(Exception):
    """Raised by a callable that refuses the problem it was given (a refusal, not an error): attest
    reports it once, as the case's refusal verdict, and the other checks of that case as
    unsupported pointing at it."""


_lib = None


def _find_library() -> Path:
    env = os.environ.get("ATTEST_PY_LIBRARY")
    if env:
        return Path(env)
    return Path(__file__).with_name("libattest_py.so")


def lib():
    global _lib
    if _lib is None:
        path = _find_library()
        if not path.is_file():
            raise AttestError(f"libattest_py '{path}': no such file (install the package with `pip install ./python`)")
        handle = ctypes.CDLL(str(path))
        handle.attest_py_abi_version.restype = ctypes.c_int
        handle.attest_py_register.argtypes = [ctypes.c_char_p, ctypes.POINTER(KernelDesc), ctypes.POINTER(ctypes.c_void_p)]
        handle.attest_py_register.restype = ctypes.c_int
        handle.attest_py_call.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        handle.attest_py_call.restype = ctypes.c_int
        handle.attest_py_kernel_run.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                                ctypes.POINTER(RunArgs), ctypes.POINTER(ctypes.c_void_p)]
        handle.attest_py_kernel_run.restype = ctypes.c_int
        handle.attest_py_free.argtypes = [ctypes.c_void_p]
        version = handle.attest_py_abi_version()
        if version != ABI_VERSION:
            raise AttestError(f"libattest_py '{path}': ABI version {version}, this package speaks {ABI_VERSION}")
        _lib = handle
    return _lib


def _take(ptr: ctypes.c_void_p) -> dict:
    if not ptr.value:
        return {}
    try:
        return json.loads(ctypes.string_at(ptr.value).decode("utf-8", "replace"))
    finally:
        lib().attest_py_free(ptr)


def call(op: str, **fields) -> tuple[int, dict]:
    """Sends one request; returns (rc, reply). rc 2 raises AttestError with the library's message."""
    req = json.dumps({"op": op, **fields}).encode()
    out = ctypes.c_void_p()
    rc = lib().attest_py_call(req, ctypes.byref(out))
    reply = _take(out)
    if rc == 2:
        raise AttestError(reply.get("error", "unknown error"))
    return rc, reply


_GPU_BACKEND: Optional[bool] = None


def gpu_backend() -> bool:
    """Whether libattest_py was built with a GPU backend (its device engine: gpu.ref64, device
    comparisons). Asked once; starts no device runtime."""
    global _GPU_BACKEND
    if _GPU_BACKEND is None:
        _GPU_BACKEND = bool(call("build")[1].get("gpu_backend", False))
    return _GPU_BACKEND


def register(name: str, desc: KernelDesc) -> str:
    out = ctypes.c_void_p()
    rc = lib().attest_py_register(name.encode(), ctypes.byref(desc), ctypes.byref(out))
    reply = _take(out)
    if rc != 0:
        raise AttestError(reply.get("error", "unknown error"))
    return reply["kernel"]


def kernel_run(kernel: str, recipe: str, problem: str, args: RunArgs) -> None:
    out = ctypes.c_void_p()
    rc = lib().attest_py_kernel_run(kernel.encode(), recipe.encode(), problem.encode(), ctypes.byref(args),
                                    ctypes.byref(out))
    reply = _take(out)
    if rc != 0:
        raise AttestError(reply.get("error", "unknown error"))
