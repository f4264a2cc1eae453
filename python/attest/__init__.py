"""attest in Python: the C++ conformance gate on the attention kernels you ship.

    import attest, torch.nn.functional as F
    def sdpa(q, k, v, *, causal, scale):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
    result = attest.gate(sdpa, recipe="bf16", cases="smoke")
    assert result.passed, result.markdown

The callable is registered in attest's C++ kernel registry as `py.<name>` and the C++ gate runs
every check on it (accuracy against FP64 within the noise floor, determinism, call paths, layouts,
poison, canary, churn, split-KV, masked rows, NaN/Inf, subnormals, refusal), with the same Philox
inputs, case ids and reports as `attest gate`. Verdicts are computed in C++; this package only
moves tensors (python/attest/_bridge.py says how) and formats. docs/python.md.
"""
from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np

from . import _bridge as B
from . import _native as N
from . import _probe
from ._device import DeviceResult, device_case, device_ladder
from ._native import AttestError, Unsupported
from ._probe import Probe

__all__ = ["gate", "probe", "Probe", "run_case", "pair", "merge", "ladder", "cpp_kernel", "list_items", "GateResult", "AttestError",
           "Unsupported", "format_ladder", "device_case", "device_ladder", "DeviceResult"]

_BOUND: dict[str, B.Bound] = {}


def _sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]", "_", name or "fn").strip(".") or "fn"
    return s


def _spec(fn: Callable, recipe: str, contract: str, name: Optional[str], device: Optional[str], dtype: Optional[str],
          layout: str, causal: str, masks: Optional[Sequence[str]], head_dims: Sequence[int], gqa: bool, cross: bool,
          head_dim_v: bool, lse: Optional[bool], deterministic: bool, mutates_inputs: bool,
          configs: Optional[Sequence[str]], supports: Optional[Callable], kwargs: Optional[dict],
          ftz: bool = False, min_alignment: int = 0, causal_cross: bool = True, isolate: bool = True,
          call_timeout: float = 600.0, accept: Optional[dict] = None) -> B.Spec:
    if contract not in ("accuracy", "bitwise"):
        raise AttestError(f"contract '{contract}' is not 'accuracy' or 'bitwise'")
    if layout not in ("bhsd", "bshd"):
        raise AttestError(f"layout '{layout}' is not 'bhsd' or 'bshd'")
    if causal not in ("top_left", "bottom_right", "both"):
        raise AttestError(f"causal '{causal}' is not 'top_left', 'bottom_right' or 'both'")
    hints = getattr(fn, "attest_declares", {})
    device = device or hints.get("device", "cpu")
    cuda = str(device).startswith("cuda")
    if configs is None:
        configs = hints.get("configs", B.CPU_CONFIGS + (B.CUDA_CONFIGS if cuda else ()))
    bad = [c for c in configs if c not in B.CPU_CONFIGS + B.CUDA_CONFIGS]
    if bad:
        raise AttestError(f"config '{bad[0]}' is not one of {', '.join(B.CPU_CONFIGS + B.CUDA_CONFIGS)}")
    if not cuda and any(c in B.CUDA_CONFIGS for c in configs):
        raise AttestError(f"configs {', '.join(c for c in configs if c in B.CUDA_CONFIGS)} need device='cuda'")
    if masks is None:
        masks = hints.get("masks", {"top_left": ("none", "causal_tl"), "bottom_right": ("none", "causal_br"),
                                    "both": ("none", "causal_tl", "causal_br")}[causal])
    dtype = B._DTYPES.get(str(dtype).replace("torch.", ""), None) if dtype is not None else B.default_dtype(recipe)
    if dtype is None:
        raise AttestError("dtype must be float32, bfloat16 or float16")
    min_alignment = int(hints.get("min_alignment", min_alignment) or 0)
    if min_alignment < 0 or (min_alignment & (min_alignment - 1)) != 0:
        raise AttestError(f"min_alignment {min_alignment} is not 0 or a power of two (bytes)")
    itemsize = {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]
    accept = dict(hints.get("accept", accept) or {})
    for c, why in accept.items():
        if not re.fullmatch(r"[a-z_][a-z0-9_.]*(@(seqlen_q|seqlen_kv|head_dim|head_dim_v)%([2-9]|[1-9][0-9]+))?", str(c)) \
                or not str(why).strip() or "\n" in str(why):
            raise AttestError(f"accept: '{c}' needs a check name (or check@field%n, field one of seqlen_q, seqlen_kv, "
                              "head_dim, head_dim_v) and a one-line reason (why the failure is accepted)")
    if call_timeout is None or not call_timeout > 0:
        raise AttestError(f"call_timeout {call_timeout} is not a positive number of seconds")
    return B.Spec(fn=fn, name=_sanitize(name or getattr(fn, "__name__", "fn")), recipe=recipe, device=str(device),
                  dtype=dtype, layout=layout, causal=causal, masks=tuple(masks),
                  head_dims=tuple(hints.get("head_dims", head_dims)), gqa=hints.get("gqa", gqa),
                  cross=hints.get("cross", cross), head_dim_v=hints.get("head_dim_v", head_dim_v),
                  lse=hints.get("lse", bool(lse)), deterministic=deterministic, bitwise=contract == "bitwise",
                  mutates_inputs=mutates_inputs, configs=tuple(configs), supports=supports or hints.get("supports"),
                  kwargs=dict(kwargs or {}), ftz=bool(hints.get("ftz", ftz)),
                  row_align=max(1, -(-min_alignment // itemsize)), causal_cross=bool(hints.get("causal_cross", causal_cross)),
                  isolate=bool(hints.get("isolate", isolate)), call_timeout=float(call_timeout), accept=accept)


def _oracles(oracles: Optional[str], device: Optional[str], fn: Callable) -> str:
    """Where the C++ checks judge: "device" (the device engine: FP64 reference on the GPU by
    gpu.ref64, the emulator on planned blocks, comparisons on the device) or "host" (attest gate's
    oracles). Default: "device" for a CUDA callable when this libattest_py has the CUDA engine,
    else "host". (The device route was opt-in for one session: its first GPU run failed torch SDPA
    on padded layouts and subnormal outputs; the torch-only repro showed those were torch's own,
    cuDNN's wrong values on unaligned rows and its flush, and with the probe's declarations the
    same smoke gate passes on both routes: docs/results/python-path/findings.md.) An explicit
    "device" needs the CUDA libattest_py: without it, one AttestError naming cause and remedy,
    before any worker starts or any case runs."""
    device = str(device or getattr(fn, "attest_declares", {}).get("device", "cpu"))
    where = oracles or ("device" if device.startswith("cuda") and N.gpu_backend() else "host")
    if where not in ("host", "device"):
        raise AttestError(f"oracles '{where}' is not 'host' or 'device'")
    if where == "device" and not device.startswith("cuda"):
        raise AttestError(f"oracles='device' needs device='cuda' (the callable's tensors on the GPU); device is '{device}'")
    if where == "device" and not N.gpu_backend():
        raise AttestError("device='cuda' judges on the device engine (FP64 reference on the GPU), and this libattest_py was "
                          "built without CUDA (ATTEST_GPU=none): install the CUDA build (ATTEST_GPU=cuda pip install "
                          "./python, or scripts/device/build py-cuda), or pass oracles='host' to judge on the host "
                          "(slow at long sequences)")
    return where


def _bind(spec: B.Spec) -> B.Bound:
    bound = B.Bound(spec)
    _BOUND[bound.kernel] = bound  # the C++ kernel points at this object's ctypes callbacks
    return bound


def _declare(fn, recipe, contract, name, device, dtype, layout, causal, masks, head_dims, gqa, cross, head_dim_v, lse,
             deterministic, mutates_inputs, configs, supports, kwargs, **more) -> B.Bound:
    return _bind(_spec(fn, recipe, contract, name, device, dtype, layout, causal, masks, head_dims, gqa, cross,
                       head_dim_v, lse, deterministic, mutates_inputs, configs, supports, kwargs, **more))


def _more(declared: dict) -> dict:
    """The declarations added after the positional ones of _spec (ftz, min_alignment, ...)."""
    return {k: declared.pop(k) for k in ("ftz", "min_alignment", "causal_cross", "isolate", "call_timeout", "accept")
            if k in declared}


def _finish(*bounds: B.Bound) -> list:
    """Ends the bounds' worker processes; returns their history (which calls ran in which worker)."""
    hist = []
    for b in bounds:
        b.close()
        hist += [{**w, "kernel": b.kernel} for w in b.workers()]
    return hist


def _run(op: str, bounds: Sequence[B.Bound], **req) -> tuple[int, dict, list]:
    """N.call(op) with the bounds' worker processes started first (so a callable attest cannot
    hand to a worker is one error before any case) and ended after: (rc, reply, worker history).
    attest failing to start or reach a worker is raised (WorkerUnavailable), never rows."""
    try:
        for b in bounds:
            b.start()
        rc, reply = N.call(op, **req)
    finally:
        workers = _finish(*bounds)
    for b in bounds:
        if b.unavailable is not None:
            raise b.unavailable
    return rc, reply, workers


@dataclass
class GateResult:
    """The C++ gate's report for one Python callable."""

    kernel: str
    exit_code: int
    report: dict
    markdown: str
    junit: str
    summary: str
    seconds: float
    stats: dict = field(default_factory=dict)
    fn_name: str = "fn"

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def results(self) -> list:
        return self.report.get("results", [])

    @property
    def failures(self) -> list:
        return [r for r in self.results if r.get("verdict") not in ("passed", "unsupported")]

    def counts(self) -> dict:
        c: dict[str, int] = {}
        for r in self.results:
            c[r.get("verdict", "?")] = c.get(r.get("verdict", "?"), 0) + 1
        return c

    def repro_lines(self, fn_name: Optional[str] = None) -> list:
        """`attest.run_case(fn, '<descriptor>')` for every case that did not pass."""
        fn_name = fn_name or self.fn_name
        return [f"attest.run_case({fn_name}, '{r['case']}')" for r in self.failures]

    def python_markdown(self, fn_name: Optional[str] = None) -> str:
        lines = self.repro_lines(fn_name)
        if not lines:
            return self.markdown
        return self.markdown.rstrip() + "\n\n### Python repro\n\n```python\n" + "\n".join(lines[:50]) + "\n```\n"

    def write(self, folder: os.PathLike) -> Path:
        """gate.md, gate.json, junit.xml, summary.txt into `folder`, all or nothing."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        files = {"gate.md": self.python_markdown(), "gate.json": json.dumps(self.report, indent=1),
                 "junit.xml": self.junit, "summary.txt": self.summary}
        staged = []
        try:
            for name, text in files.items():
                fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                staged.append((tmp, folder / name))
            for tmp, dst in staged:
                os.replace(tmp, dst)
        finally:
            for tmp, _ in staged:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        return folder


def gate(fn: Callable, *, recipe: str = "bf16", profile: str = "cpu", cases: str = "smoke",
         contract: str = "accuracy", check: Optional[str] = None, name: Optional[str] = None,
         device: Optional[str] = None, dtype: Optional[str] = None, layout: str = "bhsd", causal: str = "top_left",
         masks: Optional[Sequence[str]] = None, head_dims: Sequence[int] = (), gqa: bool = True, cross: bool = True,
         head_dim_v: bool = True, lse: Optional[bool] = None, deterministic: bool = True, mutates_inputs: bool = False,
         configs: Optional[Sequence[str]] = None, supports: Optional[Callable] = None, kwargs: Optional[dict] = None,
         ftz: bool = False, min_alignment: int = 0, causal_cross: bool = True, isolate: bool = True,
         call_timeout: float = 600.0, accept: Optional[dict] = None, reruns: int = 5, jobs: int = 1, tolerances: Optional[str] = None,
         cases_text: Optional[str] = None, out: Optional[os.PathLike] = None, oracles: Optional[str] = None,
         sample_macs: Optional[float] = None) -> GateResult:
    """Runs attest's gate on `fn(q, k, v, *, causal, scale, **kwargs) -> out | (out, lse)`.

    recipe      the numerical contract (named recipe or full string, docs/recipes.md): sets the
                noise floor and the budget; the default input dtype follows it (bf16, fp16, else f32)
    contract    "accuracy": judged against FP64 within the floor, no bitwise claim against the
                recipe emulator; "bitwise": bits must equal the emulator's as well. Run-to-run and
                call-path bit equality are required either way unless deterministic=False.
    profile     a built-in profile (its fp8/MX flavour and recipe lists); cases: a case set
                (smoke, ci, nightly, qualify, seeds) or a case file path; cases_text: inline file
    device      "cpu" (default) or "cuda": where fn's tensors live; CUDA adds the configs graph,
                graph_side, stream2, churn (python/attest/_bridge.py)
    layout      "bhsd" (torch SDPA) or "bshd": how q, k, v, out are handed to fn
    causal      what causal=True means to fn: "top_left", "bottom_right", or "both" (fn then gets
                causal=False | "top_left" | "bottom_right")
    lse         fn returns (out, lse) with lse [B,H,S] natural log: enables split_kv and merge
    masks, head_dims, gqa, cross, head_dim_v: capabilities; cases outside them are UNSUPPORTED and
                the refusal check holds fn to them. supports(problem_dict) -> None | reason adds limits.
    Declarations of what a correct kernel legitimately does (each shown in the coverage table):
    ftz         the kernel flushes subnormal outputs to zero: the subnormal check reports it as a
                declared property instead of failing it
    min_alignment  bytes every row of q, k, v must be aligned to (e.g. 16 for kernels that load
                16-byte vectors): layout and canary variants keep rows aligned to it; unaligned
                problems are outside the declaration (UNSUPPORTED), never run
    causal_cross   False: the kernel refuses causal masks when seqlen_q != seqlen_kv
    accept      {check: why}: a known defect of the kernel, written up, accepted knowingly: that
                check's failures become `accepted` rows (shown with the reason; the gate passes).
                A key `check@field%n` scopes it to problems whose field (seqlen_q, seqlen_kv,
                head_dim, head_dim_v) is not a multiple of n (a tail-tile defect): elsewhere the
                check still fails
    isolate     True (default): every call runs in a worker process, so a fault (sticky CUDA
                error, segfault, abort, out of memory, a hang past call_timeout seconds) is one
                `fault` verdict and the gate goes on in a fresh worker (python/attest/_worker.py);
                fn may be any callable (closure, lambda, bound method, partial): a spawned worker
                gets it by cloudpickle. attest failing to start a worker raises AttestError.
    A callable refuses a problem at call time by raising attest.Unsupported (or NotImplementedError;
    torch's "No available kernel" counts too): one failed refusal row for the case, unless its
    declarations exclude the case.
    out         folder for gate.md / gate.json / junit.xml / summary.txt
    oracles     where the C++ checks take the FP64 reference, noise floor and comparisons: "host"
                (attest gate's oracles, the whole problem on the CPU) or "device" (device="cuda"
                only: the device engine, gpu.ref64 on every output row, the emulator on planned
                blocks, comparisons on the device; needs the CUDA libattest_py, else AttestError;
                workers are then spawned). None: "device" for a CUDA callable when the library has
                the CUDA engine, else "host". docs/python.md
    sample_macs emulated multiply-adds per device-judged case for budget and floor (default 2^30)
    """
    where = _oracles(oracles, device, fn)
    bound = _declare(fn, recipe, contract, name, device, dtype, layout, causal, masks, head_dims, gqa, cross,
                     head_dim_v, lse, deterministic, mutates_inputs, configs, supports, kwargs, ftz=ftz,
                     min_alignment=min_alignment, causal_cross=causal_cross, isolate=isolate,
                     call_timeout=call_timeout, accept=accept)
    bound.spec.oracles = where
    req: dict[str, Any] = {"kernel": bound.kernel, "profile": profile, "reruns": reruns, "jobs": jobs, "oracles": where}
    if sample_macs is not None:
        req["sample_macs"] = float(sample_macs)
    if cases_text is not None:
        req["cases_text"] = cases_text
    else:
        req["cases"] = cases
    if check:
        req["check"] = check
    if tolerances:
        req["tolerances"] = str(tolerances)
    t0 = time.perf_counter()
    rc, reply, workers = _run("gate", [bound], **req)
    if getattr(bound, "supports_error", None):
        raise AttestError(f"gate: {bound.supports_error} (supports= must return None or a reason, never raise)")
    report = reply["report"]
    report["workers"] = workers
    res = GateResult(kernel=bound.kernel, exit_code=rc, report=report,
                     markdown=reply["markdown"] + _workers_markdown(workers),
                     junit=reply["junit"], summary=reply["summary"], seconds=time.perf_counter() - t0,
                     stats=dict(bound.spec.stats), fn_name=getattr(fn, "__name__", "fn"))
    if out is not None:
        res.write(out)
    return res


def _workers_markdown(workers: list) -> str:
    """Which calls ran in which worker process, and how each worker ended."""
    if not workers:
        return ""
    rows = ["", "### Worker processes", "", "| worker | pid | start | calls | problems | ended |", "|---:|---:|---|---:|---|---|"]
    for w in workers:
        probs = ", ".join(w["problems"][:6]) + (f" (+{len(w['problems']) - 6})" if len(w["problems"]) > 6 else "")
        rows.append(f"| {w['worker']} | {w['pid']} | {w['method']} | {w['calls']} | {probs} | {w['ended']} |")
    return "\n".join(rows) + "\n"


def run_case(fn: Callable, descriptor: str, *, reruns: int = 5, tolerances: Optional[str] = None, **declared):
    """Reruns one case (every check when the descriptor names none) on fn and returns
    (exit_code, results, dump). The descriptor's kernel=py.<name> names the binding; pass the
    same declarations as to gate()."""
    m = re.search(r"(?:^|\s)kernel=py\.(\S+)", descriptor)
    recipe = re.search(r"(?:^|\s)recipe=(\S+)", descriptor)
    if not m or not recipe:
        raise AttestError(f"descriptor '{descriptor}': needs kernel=py.<name> and recipe=")
    declared.setdefault("name", m.group(1))
    contract = declared.pop("contract", "accuracy")
    where = _oracles(declared.pop("oracles", None), declared.get("device"), fn)
    sample_macs = declared.pop("sample_macs", None)
    more = _more(declared)
    bound = _bind(_spec(fn, recipe.group(1), contract, declared.pop("name"), declared.pop("device", None),
                declared.pop("dtype", None), declared.pop("layout", "bhsd"), declared.pop("causal", "top_left"),
                declared.pop("masks", None), declared.pop("head_dims", ()), declared.pop("gqa", True),
                declared.pop("cross", True), declared.pop("head_dim_v", True), declared.pop("lse", None),
                declared.pop("deterministic", True), declared.pop("mutates_inputs", False),
                declared.pop("configs", None), declared.pop("supports", None), declared.pop("kwargs", None), **more))
    if declared:
        bound.close()
        raise AttestError(f"run_case: unknown declaration '{next(iter(declared))}'")
    bound.spec.oracles = where
    req: dict[str, Any] = {"descriptor": descriptor, "reruns": reruns, "oracles": where}
    if sample_macs is not None:
        req["sample_macs"] = float(sample_macs)
    if tolerances:
        req["tolerances"] = str(tolerances)
    rc, reply, _ = _run("run_case", [bound], **req)
    return rc, reply["results"], reply["dump"]


def _spec_of(fn, recipe, contract: str, declared: dict) -> B.Spec:
    """A Spec from gate()-style keywords, popped from `declared`: the ones it does not know stay."""
    more = _more(declared)
    return _spec(fn, recipe, contract, declared.pop("name", None), declared.pop("device", None),
                 declared.pop("dtype", None), declared.pop("layout", "bhsd"), declared.pop("causal", "top_left"),
                 declared.pop("masks", None), declared.pop("head_dims", ()), declared.pop("gqa", True),
                 declared.pop("cross", True), declared.pop("head_dim_v", True), declared.pop("lse", None),
                 declared.pop("deterministic", True), declared.pop("mutates_inputs", False),
                 declared.pop("configs", None), declared.pop("supports", None), declared.pop("kwargs", None), **more)


def _quick(fn, recipe, contract="accuracy", **declared) -> B.Bound:
    return _bind(_spec_of(fn, recipe, contract, declared))


def probe(fn: Callable, *, recipe: str = "bf16", timeout: float = 120.0, **declared) -> Probe:
    """Learns fn's limits by calling it (python/attest/_probe.py): refused shapes (GQA, D != Dv,
    cross attention, causal with S != T, head dims 32..128), flushed subnormal outputs, a NaN that
    leaks through a causal mask, unaligned rows that fail. Returns a Probe: gate() keywords (the
    given declarations plus the learned ones; `attest.gate(fn, recipe=..., **p)`, or
    `pair(a, b, declared_a=dict(p))`) and p.evidence, what the probe saw for each. The calls run
    in a throw-away process, as the gate's workers do."""
    given = dict(declared)
    spec = _spec_of(fn, recipe, "accuracy", declared)
    if declared:
        raise AttestError(f"probe: unknown declaration '{next(iter(declared))}'")
    return _probe.run(spec, given, timeout)


def pair(fn_a: Callable, fn_b: Callable, *, contract: str = "bitwise", recipe: str = "bf16", profile: str = "cpu",
         cases: str = "smoke", cases_text: Optional[str] = None, declared_a: Optional[dict] = None,
         declared_b: Optional[dict] = None, tolerances: Optional[str] = None, **declared) -> tuple[int, list]:
    """Direct-vs-wrapper or tuned-vs-default parity on the same cases (one per input group):
    contract "bitwise" (bits equal) or "accuracy" (|b - a| within the accuracy row's bound with
    the recipe's budget and floor). A case either side refuses (its declarations, or at call time:
    attest.Unsupported, NotImplementedError, "No available kernel") is unsupported with that side's
    reason; declared_a / declared_b apply to one side. Returns (exit_code, results)."""
    a = _quick(fn_a, recipe, name=(declared_a or {}).pop("name", None) or getattr(fn_a, "__name__", "a") + "_a",
               **{**declared, **(declared_a or {})})
    b = _quick(fn_b, recipe, name=(declared_b or {}).pop("name", None) or getattr(fn_b, "__name__", "b") + "_b",
               **{**declared, **(declared_b or {})})
    req: dict[str, Any] = {"kernel_a": a.kernel, "kernel_b": b.kernel, "contract": contract, "profile": profile}
    if cases_text is not None:
        req["cases_text"] = cases_text
    else:
        req["cases"] = cases
    if tolerances:
        req["tolerances"] = str(tolerances)
    rc, reply, _ = _run("pair", [a, b], **req)
    return rc, reply["results"]


def merge(fn: Callable, *, recipe: str = "bf16", problem: str = "b1h2s256t1024d64", shards: Sequence[int] = (2, 4, 8),
          dist: str = "normal", seed: int = 1, tolerances: Optional[str] = None, **declared) -> tuple[int, list]:
    """Merge conformance: K/V split into each of `shards` pieces, fn called per shard for
    (out, lse), merged by LSE in C++ (conformance/dist merge_partials), compared with the single call
    under the split_kv tolerance row (budget: the emulator doing the same). fn must return LSE."""
    declared.setdefault("lse", True)
    b = _quick(fn, recipe, **declared)
    req = {"kernel": b.kernel, "recipe": recipe, "problem": problem, "shards": list(shards), "dist": dist, "seed": seed}
    if tolerances:
        req["tolerances"] = str(tolerances)
    rc, reply, _ = _run("merge", [b], **req)
    return rc, reply["results"]


def ladder(fn: Callable, *, recipe: str = "bf16", lengths: Sequence[int] = (256, 512, 1024, 2048, 4096),
           heads: int = 1, heads_kv: Optional[int] = None, head_dim: int = 128, rows: int = 128, blocks: int = 4,
           slope_margin: float = 0.15, dist: str = "normal", seed: int = 1, tolerances: Optional[str] = None,
           **declared) -> dict:
    """Sequence-length ladder: error per length (FP64 reference on `blocks` contiguous blocks of
    `rows` query rows against all keys) and the fitted log-log slope of the error against the
    length, which must stay within `slope_margin` of the emulator's and floor's slopes."""
    b = _quick(fn, recipe, **declared)
    req = {"kernel": b.kernel, "recipe": recipe, "lengths": list(lengths), "heads": heads,
           "heads_kv": heads_kv or heads, "head_dim": head_dim, "rows": rows, "blocks": blocks,
           "slope_margin": slope_margin, "dist": dist, "seed": seed}
    if tolerances:
        req["tolerances"] = str(tolerances)
    _, reply, _ = _run("ladder", [b], **req)
    return reply


def format_ladder(reply: dict) -> str:
    """The ladder as a text table."""
    rows = ["| length | KV tiles | rel_l2 | budget rel_l2 | floor rel_l2 | max_abs | verdict |",
            "|---:|---:|---:|---:|---:|---:|---|"]
    g = lambda e, k: f"{e[k]:.3e}" if isinstance(e.get(k), (int, float)) else "-"  # noqa: E731
    for e in reply["table"]:
        rows.append(f"| {e['length']} | {e['kv_tiles']} | {g(e, 'rel_l2')} | {g(e, 'budget_rel_l2')} | "
                    f"{g(e, 'floor_rel_l2')} | {g(e, 'max_abs')} | {e['verdict']} |")
    s = reply["slope"]
    f = lambda x: f"{x:.3f}" if isinstance(x, (int, float)) else str(x)  # noqa: E731
    rows.append("")
    rows.append(f"slope (log rel_l2 vs log length): kernel {f(s['kernel'])}, emulator {f(s['budget'])}, "
                f"floor {f(s['floor'])}; threshold {f(s['threshold'])} -> {reply['verdict']}"
                + (f" ({reply['reason']})" if reply.get("reason") else ""))
    return "\n".join(rows)


def list_items(what: str) -> list:
    """kernels, recipes, checks, cases or profiles known to the library."""
    return N.call("list", what=what)[1]["items"]


def cpp_kernel(kernel: str, *, causal: str = "both") -> Callable:
    """A Python callable that runs the registered C++ kernel `kernel` (cpu.tiled.*, mutant.*)
    through libattest_py on torch CPU float32 tensors in bshd layout: the way attest's own
    kernels and mutants travel the Python path. It returns (out, lse) and carries its C++
    capabilities and limits (attest_declares) so gate() declares exactly what the kernel does."""
    import torch  # noqa: PLC0415

    info = N.call("kernel_info", kernel=kernel)[1]

    def fn(q, k, v, *, causal=False, scale=None):
        b, s, h, d = q.shape
        t, hkv, dv = k.shape[1], k.shape[2], v.shape[3]
        mask = {False: "none", "top_left": "causal_tl", "bottom_right": "causal_br", True: "causal_tl"}[causal]
        problem = B.problem_string(b, h, hkv, s, t, d, dv, mask, scale)
        qn, kn, vn = (x.detach().to(torch.float32).numpy() for x in (q, k, v))
        out = np.empty((b, s, h, dv), np.float32)
        lse = np.empty((b, h, s), np.float32)
        ts = [B.tensor_struct(x) for x in (qn, kn, vn, out, lse)]
        args = N.RunArgs()
        args.struct_size = ctypes.sizeof(N.RunArgs)
        args.config = b""
        args.q, args.k, args.v, args.out, args.lse = (ctypes.pointer(t_) for t_ in ts)
        N.kernel_run(kernel, fn.attest_recipe, problem, args)
        return torch.from_numpy(out), torch.from_numpy(lse)

    import ctypes  # noqa: PLC0415

    def supports(p: dict) -> Optional[str]:
        text = p["text"]
        ok = N.call("supports", kernel=kernel, problem=text, recipe=p["recipe"])[1]
        return None if ok["ok"] else ok["reason"]

    fn.__name__ = _sanitize(kernel.replace(".", "_"))
    fn.attest_recipe = info["recipes"][0]
    fn.attest_declares = {"head_dims": tuple(info["head_dims"]), "masks": tuple(info["masks"]), "gqa": info["gqa"],
                          "cross": info["cross"], "head_dim_v": info["head_dim_v"], "lse": info["lse"],
                          "supports": supports, "configs": B.CPU_CONFIGS,
                          # attest's own host kernels run in-process: they cannot fault the device, and
                          # their OpenMP team would not survive a fork (libgomp is not fork-safe)
                          "isolate": False}
    fn.attest_info = info
    return fn
