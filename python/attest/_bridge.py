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
  batch2      the sample inside a batch of 2 (with a second, different sample, as in CFG); the
              first half of the output is compared
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
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import _native as N

CPU_CONFIGS = ("contig", "batch2")
CUDA_CONFIGS = ("graph", "graph_side", "stream2", "churn")


def _np_view(t: N.Tensor) -> np.ndarray:
    """numpy float32 view of an attest_plugin_tensor's memory (logical shape, element strides)."""
    if t.dtype != N.DTYPE["f32"]:
        raise TypeError(f"tensor dtype code {t.dtype} is not float32")
    shape = tuple(t.shape[i] for i in range(t.rank))
    strides = tuple(t.strides[i] for i in range(t.rank))
    if any(s == 0 for s in shape):
        return np.zeros(shape, np.float32)
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    buf = (ctypes.c_float * extent).from_address(t.data)
    flat = np.frombuffer(buf, dtype=np.float32)
    return np.lib.stride_tricks.as_strided(flat, shape=shape, strides=tuple(4 * s for s in strides))


def _torch():
    import torch  # noqa: PLC0415 (torch is optional: only callables that take torch tensors need it)

    return torch


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


@dataclass
class Spec:
    """What a callable declares; see attest.gate for the meaning of each field."""

    fn: Callable
    name: str
    recipe: str
    device: str = "cpu"
    dtype: str = "float32"
    layout: str = "bhsd"
    # What causal=True means to fn: "top_left" (torch SDPA), "bottom_right" (flash_attn), or "both":
    # fn then gets causal=False, "top_left" or "bottom_right".
    causal: str = "top_left"
    masks: Sequence[str] = ("none", "causal_tl")
    head_dims: Sequence[int] = ()
    gqa: bool = True
    cross: bool = True
    head_dim_v: bool = True
    lse: bool = False
    deterministic: bool = True
    bitwise: bool = False
    mutates_inputs: bool = False
    configs: Sequence[str] = ()
    supports: Optional[Callable[[dict], Optional[str]]] = None  # problem dict -> None or a refusal reason
    kwargs: dict = field(default_factory=dict)
    # Declarations of what the kernel legitimately does (reported in the coverage table):
    ftz: bool = False            # flushes subnormal outputs to zero
    row_align: int = 1           # elements: rows (every stride but the innermost) a multiple of it
    causal_cross: bool = True    # causal masks with seqlen_q != seqlen_kv
    accept: dict = field(default_factory=dict)  # check -> why: known failures accepted knowingly
    isolate: bool = True         # calls run in a worker process (python/attest/_worker.py)
    call_timeout: float = 600.0  # seconds: a call that takes longer is a hang (fault)
    stats: dict = field(default_factory=lambda: {"calls": 0, "fn_seconds": 0.0, "bridge_seconds": 0.0})
    last_error: Optional[str] = None


# Messages by which frameworks refuse a problem at call time (a refusal, not an error).
REFUSAL_MARKERS = ("No available kernel", "No viable backend")


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
            if self.spec.isolate:
                if self.worker is None:
                    from ._worker import Worker  # noqa: PLC0415

                    self.worker = Worker(self.spec, self.spec.call_timeout)
                rc, text, fn_s = self.worker.call(args_p.contents)
            else:
                rc, text, fn_s = 0, "", invoke(self.spec, args_p.contents)
        except BaseException as e:  # noqa: BLE001 (nothing may escape into C++)
            from ._worker import classify  # noqa: PLC0415

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

    def close(self) -> None:
        """Ends the worker process (if any); its history stays in self.workers()."""
        if self.worker is not None:
            self.worker.close()

    def workers(self) -> list:
        return list(self.worker.history) if self.worker is not None else []


def _problem_dict(p: N.Problem) -> dict:
    return {"batch": p.batch, "heads_q": p.heads_q, "heads_kv": p.heads_kv, "seqlen_q": p.seqlen_q,
            "seqlen_kv": p.seqlen_kv, "head_dim": p.head_dim, "head_dim_v": p.head_dim_v,
            "mask": {v: k for k, v in N.MASKS.items()}[p.mask], "scale": p.softmax_scale,
            "text": p.text.decode() if p.text else ""}


def _to_framework(torch, x: np.ndarray, spec: Spec):
    t = torch.from_numpy(x)
    dtype = getattr(torch, spec.dtype)
    if spec.device == "cpu" and dtype == torch.float32:
        return t
    dst = torch.empty_strided(t.shape, t.stride(), dtype=dtype, device=spec.device)
    dst.copy_(t)
    return dst


def _to_layout(t, layout: str):
    return t.permute(0, 2, 1, 3) if layout == "bhsd" else t


def _from_layout(t, layout: str):
    return t.permute(0, 2, 1, 3) if layout == "bhsd" else t


def _split(res, want_lse: bool):
    if isinstance(res, (tuple, list)):
        out = res[0]
        lse = res[1] if len(res) > 1 else None
    else:
        out, lse = res, None
    return out, lse


def _call(spec: Spec, q, k, v, causal, scale):
    return spec.fn(q, k, v, causal=causal, scale=scale, **spec.kwargs)


def _graph_call(torch, spec: Spec, q, k, v, causal, scale, side: bool):
    # Inputs A: the same shapes and strides, other values (B * 0.5, exact in every float format
    # away from the subnormal range), so a replay that still reads A or A's derived buffers shows.
    static = []
    for x in (q, k, v):
        s = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
        s.copy_(x * 0.5)
        static.append(s)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the capture (JIT, autotuning, plans)
        for _ in range(2):
            _call(spec, *static, causal, scale)
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    capture_stream = torch.cuda.Stream() if side else None
    with torch.cuda.graph(g, stream=capture_stream):
        res = _call(spec, *static, causal, scale)
    out, lse = _split(res, spec.lse)
    out.fill_(float("nan"))
    if lse is not None:
        lse.fill_(float("nan"))
    for s, x in zip(static, (q, k, v)):
        s.copy_(x)
    if side:
        capture_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(capture_stream):
            g.replay()
        torch.cuda.current_stream().wait_stream(capture_stream)
    else:
        g.replay()
    torch.cuda.synchronize()
    return res


def _churn(torch, device):
    # Hand NaN-filled blocks of assorted sizes through the caching allocator and free them: the
    # callable's own outputs and workspaces then start as NaN instead of as zeros or old results.
    junk = [torch.full((n,), float("nan"), device=device) for n in (1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22)]
    del junk


def args_views(a: N.RunArgs) -> tuple:
    """(problem dict, config, q, k, v, out, lse) of one attest call: numpy views of attest's buffers."""
    p = a.problem.contents
    info = _problem_dict(p)
    info["ragged"] = bool(p.cu_seqlens_q)
    config = a.config.decode() if a.config else ""
    views = [_np_view(t.contents) for t in (a.q, a.k, a.v, a.out)]
    return (info, config, *views, _np_view(a.lse.contents) if a.lse else None)


def invoke(spec: Spec, a: N.RunArgs) -> float:
    """Runs spec.fn on one attest call in this process; returns the seconds spent inside fn."""
    return run_views(spec, *args_views(a))


_INT_VIEW = {2: "int16", 4: "int32", 8: "int64"}


def _bits(torch, x):
    # NaN != NaN: an input guard compares bit patterns, not values (attest injects NaN on purpose).
    return x.view(getattr(torch, _INT_VIEW[x.element_size()])) if x.is_floating_point() else x


def run_views(spec: Spec, p: dict, config: str, qn, kn, vn, outn, lsen) -> float:
    """The call on numpy views (attest's buffers in-process, or the shared buffers of a worker):
    inputs to the framework, fn, the outputs' logical elements written into outn / lsen."""
    torch = _torch()
    mask = p["mask"]
    if mask == "none":
        causal = False
    elif spec.causal == "both":
        causal = "top_left" if mask == "causal_tl" else "bottom_right"
    elif (mask == "causal_tl" and spec.causal == "top_left") or (mask == "causal_br" and spec.causal == "bottom_right"):
        causal = True
    else:
        raise ValueError(f"mask {mask} is not what causal=True means to this callable ({spec.causal})")
    if p.get("ragged"):
        raise ValueError("ragged problems are not supported by the Python bridge")
    scale = float(p["scale"])
    q, k, v = (_to_layout(_to_framework(torch, x, spec), spec.layout) for x in (qn, kn, vn))
    cuda = spec.device.startswith("cuda")
    if config in CUDA_CONFIGS and not cuda:
        raise ValueError(f"config {config} needs a CUDA callable")
    guard = None
    if config == "" and not spec.mutates_inputs:
        guard = [x.clone() for x in (q, k, v)]
    batch = p["batch"]
    if config == "contig":
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    elif config == "batch2":
        # A second, different sample (the sequence reversed, and negated q) beside the first.
        seq_dim = 2 if spec.layout == "bhsd" else 1
        q = torch.cat([q, -q.flip(seq_dim)], 0)
        k = torch.cat([k, k.flip(seq_dim)], 0)
        v = torch.cat([v, v.flip(seq_dim)], 0)
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    if config in ("graph", "graph_side"):
        res = _graph_call(torch, spec, q, k, v, causal, scale, side=config == "graph_side")
    elif config == "stream2":
        s2 = torch.cuda.Stream()
        s2.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s2):
            res = _call(spec, q, k, v, causal, scale)
        torch.cuda.current_stream().wait_stream(s2)
    else:
        if config == "churn":
            _churn(torch, spec.device)
        res = _call(spec, q, k, v, causal, scale)
    if cuda:
        torch.cuda.synchronize()
    fn_s = time.perf_counter() - t0
    out, lse = _split(res, spec.lse)
    if guard is not None:
        for name, g, x in zip("qkv", guard, (q, k, v)):
            if not torch.equal(_bits(torch, g), _bits(torch, x)):
                raise RuntimeError(f"the callable modified its input {name} in place (declare mutates_inputs=True "
                                   f"to have attest hand it copies)")
    if config == "batch2":
        out = out[:batch]
        lse = lse[:batch] if lse is not None else None
    out = _from_layout(out, spec.layout)
    want = tuple(outn.shape)
    if tuple(out.shape) != want:
        raise ValueError(f"output shape {tuple(out.shape)} in layout {spec.layout} is not {want} (logical bshd)")
    torch.from_numpy(outn).copy_(out.detach().to("cpu", torch.float32))
    if lsen is not None:
        if lse is None:
            raise ValueError("the callable declares lse=True but returned no LSE")
        lse = lse.detach()
        if tuple(lse.shape) != tuple(lsen.shape):
            raise ValueError(f"lse shape {tuple(lse.shape)} is not {tuple(lsen.shape)} ([B,H,S])")
        torch.from_numpy(lsen).copy_(lse.to("cpu", torch.float32))
    return fn_s


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
