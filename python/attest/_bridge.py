"""The callback kernel: how a Python attention callable is called on attest's buffers.

attest's C++ engine calls `run` (a ctypes function pointer in an attest_plugin_kernel) with host
float32 tensors in logical order: q [B,S,H,D], k [B,T,Hkv,D], v [B,T,Hkv,Dv] with the strides of
the case's layout (bshd, bhsd, strided with a pad, packed), out [B,S,H,Dv] prefilled with poison
and lse [B,H,S] or NULL. Here they become numpy views of that memory (no copy), then framework
tensors:

- CPU and the kernel's dtype float32: torch.from_numpy of the views, zero-copy, strides as given
  (so a callable that writes into its inputs is caught by the canary check);
- otherwise a tensor of the kernel's dtype on its device with the *same strides*
  (torch.empty_strided + copy_): a bhsd or padded view stays that view, cast by round to nearest
  even (which is what the bf16/fp16 recipes' input quantizers do).

The callable gets them in the layout it declares ("bhsd": q.permute(0,2,1,3), torch's SDPA
convention; "bshd": as they are), with keyword arguments causal= and scale=, and returns out or
(out, lse) in that layout. The result is copied (cast to float32) into attest's out and lse
buffers, logical elements only, so guard zones and pad gaps keep their pattern unless the
callable really wrote there. A CUDA callable therefore costs one host-to-device copy of q, k, v
and one device-to-host copy of out and lse per call: attest judges the bits the kernel computed,
the copies are exact.

Configs (Kernel::configs(): each must give the default call's bits; the C++ call_path check
compares them) are further ways of invoking the same callable:

  contig      inputs made contiguous in the declared layout first
  batch2      the sample inside a batch of 2 (with a second, different sample, as in CFG): the
              first half goes back to be compared, the second must have the bits of fn's call
              on that sample alone (else the call fails with the first differing element)
  graph       CUDA graph: warm-up, capture with inputs A, output filled with NaN, inputs B (the
              case's) copied into the captured buffers, replay: must equal eager on B
  graph_side  the same, captured and replayed on a user-created side stream
  stream2     the call enqueued on a second stream
  churn       the device caching allocator first hands out and frees NaN-filled blocks, so
              outputs and workspaces the callable allocates start as NaN

graph, graph_side, stream2 and churn are declared only for CUDA callables.
"""
from __future__ import annotations

import ctypes
import math
import time
import traceback
from typing import Optional

import numpy as np

from . import _native as N
from ._call import (CPU_CONFIGS, CUDA_CONFIGS, REFUSAL_MARKERS, _bits, _call, _from_layout, _graph_call, _np_view,  # noqa: F401
                    _problem_dict, _split, _to_framework, _to_layout, _torch, args_views, invoke, run_views)
from ._spec import Spec  # noqa: F401 (attest.gate builds it as B.Spec)
from ._worker import Worker, WorkerUnavailable, classify

_DTYPES = {"f32": "float32", "float32": "float32", "bf16": "bfloat16", "bfloat16": "bfloat16", "f16": "float16",
           "fp16": "float16", "float16": "float16"}


def default_dtype(recipe: str) -> str:
    """The dtype a kernel of `recipe` is fed: bf16/fp16 casts take that dtype, every other recipe
    (quantized: int8, fp8, mx) float32, so its quantizer sees the values attest generated."""
    r = recipe.strip()
    if r.startswith("bf16") or r.startswith("q=bf16"):
        return "bfloat16"
    if r.startswith("fp16") or r.startswith("q=fp16"):
        return "float16"
    return "float32"


def _flags(s: Spec) -> int:
    f = N.CAP_THREAD_SAFE * 0
    f |= N.CAP_GQA if s.gqa else 0
    f |= N.CAP_CROSS if s.cross else 0
    f |= N.CAP_HEAD_DIM_V if s.head_dim_v else 0
    f |= N.CAP_LSE if s.lse else 0
    f |= N.CAP_DETERMINISTIC if s.deterministic else 0
    f |= N.CAP_BITWISE if s.bitwise else 0
    f |= N.CAP_GRAPH_CAPTURABLE if s.device.startswith("cuda") else 0
    return f


class Bound:
    """A Spec registered as kernel py.<name>: owns the ctypes objects the C++ side points at."""

    def __init__(self, spec: Spec):
        self.spec = spec
        self.worker = None  # _worker.Worker, started on the first call when spec.isolate
        self._run = N.RUN_FN(self._run_cb)
        self._keep = []
        enc = lambda s: s.encode()  # noqa: E731
        recipes = (ctypes.c_char_p * 1)(enc(spec.recipe))
        configs = (ctypes.c_char_p * max(1, len(spec.configs)))(*[enc(c) for c in spec.configs])
        dims = (ctypes.c_int64 * max(1, len(spec.head_dims)))(*spec.head_dims)
        self._keep += [recipes, configs, dims]
        d = N.KernelDesc()
        d.struct_size = ctypes.sizeof(N.KernelDesc)
        d.memory = 0
        d.name = enc(spec.name)
        d.backend = enc(spec.device)
        d.recipes = ctypes.cast(recipes, ctypes.POINTER(ctypes.c_char_p))
        d.n_recipes = 1
        d.configs = ctypes.cast(configs, ctypes.POINTER(ctypes.c_char_p))
        d.n_configs = len(spec.configs)
        d.head_dims = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
        d.n_head_dims = len(spec.head_dims)
        d.masks = sum(1 << N.MASKS[m] for m in spec.masks)
        d.layouts = sum(1 << v for v in N.LAYOUTS.values())
        d.dtypes = 0
        d.flags = _flags(spec)
        # `supports=` is written beside masks= and head_dims=: a declaration, its refusals UNSUPPORTED.
        d.declares = (N.DECLARE_FTZ if spec.ftz else 0) | (0 if spec.causal_cross else N.DECLARE_NO_CAUSAL_CROSS) \
            | (N.DECLARE_SUPPORTS_LIMITS if spec.supports is not None else 0)
        d.row_align = max(1, int(spec.row_align))
        accepts = "\n".join(f"{c}={why}" for c, why in spec.accept.items()).encode()
        self._keep.append(accepts)
        d.accepts = accepts
        d.run = self._run
        if spec.supports is not None:
            self._supports = N.SUPPORTS_FN(self._supports_cb)
            d.supports = self._supports
        self.desc = d
        self.supports_error = None  # first exception of supports= (gate() raises it)
        self.unavailable: Optional[WorkerUnavailable] = None  # attest could not start/reach a worker (raised after)
        self.kernel = N.register(spec.name, d)

    def _supports_cb(self, _ctx, problem_p, recipe, reason, size) -> int:
        try:
            info = _problem_dict(problem_p.contents)
            info["recipe"] = recipe.decode() if recipe else ""
            why = self.spec.supports(info)
        except BaseException as e:  # noqa: BLE001
            # supports= is a declaration: a raising one must not turn cases into declared limits.
            # The case is refused here (no call) and gate() raises AttestError afterwards.
            why = f"supports() raised {type(e).__name__}: {e}"
            self.supports_error = self.supports_error or why
        if not why:
            return 1
        data = str(why).replace("\n", " ").encode("utf-8", "replace")[: max(0, size - 1)] + b"\0"
        ctypes.memmove(reason, data, min(len(data), size))
        return 0

    # -- the callback --
    def _run_cb(self, _ctx, args_p, msg, msg_size) -> int:
        t0 = time.perf_counter()
        try:
            if self.unavailable is not None:  # no worker: the call is not made (the gate raises afterwards)
                raise self.unavailable
            if self.spec.isolate:
                self.start()
                rc, text, fn_s = self.worker.call(args_p.contents)
            else:
                rc, text, fn_s = 0, "", invoke(self.spec, args_p.contents)
        except WorkerUnavailable as e:
            # attest's own machinery failed, not the kernel: remembered and raised by the gate, whose
            # rows are then never shown.
            self.unavailable = self.unavailable or e
            rc, text, fn_s = N.RUN_ERROR, str(e), 0.0
        except BaseException as e:  # noqa: BLE001 (nothing may escape into C++)
            rc, text, fn_s = classify(self.spec, e), f"{type(e).__name__}: {e}", 0.0
            self.spec.last_error = traceback.format_exc()
        if rc == 0:
            self.spec.stats["calls"] += 1
            self.spec.stats["fn_seconds"] += fn_s
            self.spec.stats["bridge_seconds"] += time.perf_counter() - t0 - fn_s
            return 0
        data = text.replace("\n", " ").encode("utf-8", "replace")[: max(0, msg_size - 1)] + b"\0"
        ctypes.memmove(msg, data, min(len(data), msg_size))
        return rc

    def start(self) -> None:
        """Starts the worker process now (isolate=True); WorkerUnavailable when attest cannot."""
        if self.spec.isolate:
            if self.worker is None:
                self.worker = Worker(self.spec, self.spec.call_timeout)
            self.worker.start()

    def close(self) -> None:
        """Ends the worker process (if any); its history stays in self.workers()."""
        if self.worker is not None:
            self.worker.close()

    def workers(self) -> list:
        return list(self.worker.history) if self.worker is not None else []


def problem_info(a: N.RunArgs) -> dict:
    return _problem_dict(a.problem.contents)


def tensor_struct(x: np.ndarray) -> N.Tensor:
    """attest_plugin_tensor of a float32 numpy array (any strides)."""
    if x.dtype != np.float32:
        raise TypeError("float32 expected")
    t = N.Tensor()
    t.struct_size = ctypes.sizeof(N.Tensor)
    t.dtype = N.DTYPE["f32"]
    t.rank = x.ndim
    t.data = x.ctypes.data
    for i in range(x.ndim):
        t.shape[i] = x.shape[i]
        t.strides[i] = x.strides[i] // 4
    return t


def problem_string(b, h, hkv, s, t, d, dv, mask, scale) -> str:
    text = f"b{b}h{h}" + (f"k{hkv}" if hkv != h else "") + f"s{s}" + (f"t{t}" if t != s else "") + f"d{d}"
    text += f"v{dv}" if dv != d else ""
    if mask != "none":
        text += f":mask={mask}"
    if scale is not None and not math.isclose(scale, 1 / math.sqrt(d), rel_tol=0, abs_tol=0):
        text += f":scale={scale!r}"
    return text
