"""Device-resident cases (docs/python.md "Device-resident cases"): real shapes at GPU speed.

The gate's callback path (_bridge.py) hands the callable host tensors and copies them to the
GPU and back on every call; fine for toy shapes, hopeless at 75k tokens. Here the tensors live
where the kernel runs, from the start:

  1. q, k, v are allocated as float32 [B,S,H,D] on the kernel's device and filled by attest
     (op device_generate: the case's Philox streams on the GPU, bit-identical to the CPU
     generator, so a case id means the same tensors on either side);
  2. they are cast to the kernel's dtype on the device (round to nearest even, what the cast
     recipes' input quantizers do) and handed to the callable in its layout (views, no copy);
  3. the output is judged where it lives (op device_judge): the FP64 reference (gpu.ref64 on the
     same device buffers) and the recipe emulator with its floor twin on a seeded sample of
     (batch, head, query-row block) slices, judged by the gate's own accuracy rule, every row
     against FP64 reduced per block on the device, plus a NaN/Inf scan of the whole output; reruns
     and call paths are compared bit for bit on the device and the inputs fingerprinted around
     every call (ops device_log_*: one call log, read back once). Only figures and the emulated
     rows reach the host.

Verdicts are the C++ library's; this module only allocates, calls and times. Every tensor crosses
as a view {ptr, dtype, shape, strides, device} of the framework's memory (torch data_ptr/stride).
With device="cpu" the same path runs on host tensors (the CPU generator and reference): CI checks
it that way.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from . import _bridge as B
from . import _native as N

_DTYPE_CODE = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}


def _torch():
    import torch  # noqa: PLC0415

    return torch


def view(t, logical=None) -> dict:
    """A framework tensor as the C library reads it: pointer, dtype, logical 4-D shape and element
    strides, and whether it is device memory. No copy."""
    t = t if logical is None else logical
    name = str(t.dtype).replace("torch.", "")
    if name not in _DTYPE_CODE:
        raise N.AttestError(f"tensor dtype {t.dtype} is not float32, bfloat16 or float16")
    if t.dim() != 4:
        raise N.AttestError(f"tensor of rank {t.dim()} where 4 is expected ([B,S,H,D])")
    return {"ptr": int(t.data_ptr()), "dtype": _DTYPE_CODE[name], "shape": list(t.shape), "strides": list(t.stride()),
            "device": t.device.type != "cpu"}


def parse_descriptor(descriptor: str) -> dict:
    """key=value fields of a case descriptor (kernel, recipe, problem, dist, seed; check is ignored)."""
    fields = {}
    for tok in descriptor.split():
        if "=" not in tok:
            raise N.AttestError(f"descriptor '{descriptor}': token '{tok}' is not key=value")
        k, v = tok.split("=", 1)
        fields[k] = v
    for k in ("problem",):
        if k not in fields:
            raise N.AttestError(f"descriptor '{descriptor}': no {k}=")
    return fields


@dataclass
class DeviceResult:
    """One device-resident case: the C++ result rows (the gate's JSON rows) and the timings."""

    descriptor: str
    rows: list
    exit_code: int
    stats: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def failures(self) -> list:
        return [r for r in self.rows if r["verdict"] not in ("passed", "unsupported", "accepted")]

    def repro_line(self) -> str:
        s = self.stats.get("sample_repro", "")
        return f'attest.device_case(fn, "{self.descriptor}"{", " + s.replace(" ", ", ") if s else ""})'

    def markdown(self) -> str:
        lines = ["| check | verdict | reason |", "|---|---|---|"]
        for r in self.rows:
            lines.append(f"| {r['check']} | {r['verdict'].upper()} | {(r.get('reason') or '').replace('|', '/')[:300]} |")
        smp = self.stats.get("sample")
        if smp:
            lines.append("")
            cov = self.stats.get("coverage") or {}
            if cov:
                lines.append(f"coverage: accuracy compared {cov['rows_compared_fp64']} of {cov['rows_total']} rows with FP64 "
                             f"(fraction {cov['fraction']:g}); bitwise {cov['bitwise']}")
            lines.append(f"emulated: {smp['slices']} blocks of {smp['rows_per_block']} query rows "
                         f"({smp['rows_sampled']} of {smp['rows_total']} rows, {'complete' if smp['complete'] else 'sampled'}), "
                         f"KV tiles covered {smp['kv_tiles_covered']}/{smp['kv_tiles']}, seed {smp['seed']}")
        if self.stats.get("mutates_inputs"):
            lines.append("declared mutates_inputs: every call got copies of q, k, v (no input guard)")
        lines.append(f"repro: `{self.repro_line()}`")
        return "\n".join(lines)


def _kernel_out(res):
    if isinstance(res, (tuple, list)):
        return res[0]
    return res


def device_case(fn: Callable, descriptor: str, *, checks: Sequence[str] = ("accuracy", "determinism", "call_path"),
                reruns: int = 2, configs: Optional[Sequence[str]] = None, layout: str = "bhsd",
                dtype: Optional[str] = None, contract: str = "accuracy", device: str = "cuda", causal: str = "top_left",
                sample_rows: Optional[int] = None, sample_macs: Optional[float] = None,
                tolerances: Optional[str] = None, name: Optional[str] = None, kwargs: Optional[dict] = None,
                mutates_inputs: bool = False, scratch_bytes: Optional[int] = None,
                operands: Optional[Callable] = None) -> DeviceResult:
    """Runs one case on device-resident tensors and returns the C++ verdicts.

    descriptor: "recipe=bf16 problem=b1h40s75600d128 dist=normal seed=1" (kernel= optional).
    checks: accuracy (every output row against FP64, reduced per 64-row block on the device; the
    noise-floor budget from the recipe emulator on the planned blocks; "bitwise" too when
    contract="bitwise", on the planned blocks),
    determinism (`reruns` further calls, bit for bit), call_path (`configs`: contig = inputs made
    contiguous in the declared layout, graph = CUDA graph capture and replay; CUDA only; default both on
    CUDA, contig on the CPU). causal: the callable's causal convention (its one boolean means
    top_left or bottom_right), as gate()'s declaration. sample_rows / sample_macs: None = the
    library's defaults (64 rows, 2^33 multiply-adds). The output's LSE, if the callable returns
    one, is not judged on this path (the gate's callback path judges it). Every call is followed by
    the input guard (fingerprints of q, k, v before and after: a callable that writes into its
    inputs fails `input_guard`); mutates_inputs=True hands each call copies instead. scratch_bytes:
    the device FP64 reference chunk (None: the library's 512 MiB).
    operands: fn(q, k, v, *, causal, scale) -> {"q": {"codes", "scales"}, "k": {"codes", "scales",
    "mean"}, ...}, the quantized operands the kernel hands its attention stage (codes int8 in the
    declared layout, scales in the recipe quantizer's scales order, mean the smoothing km
    subtracted, in the layout of k with one token): check `operands` judges them against the
    recipe's quantizer on the same inputs (conformance/operands.hpp), on a host copy of them."""
    torch = _torch()
    t_start = time.perf_counter()
    f = parse_descriptor(descriptor)
    recipe = f.get("recipe", "bf16")
    kernel = f.get("kernel") or f"py.{re.sub(r'[^A-Za-z0-9_.-]', '_', name or getattr(fn, '__name__', 'fn'))}"
    seed = int(f.get("seed", 1))
    dist = f.get("dist", "normal")
    base = {"kernel": kernel, "recipe": recipe, "problem": f["problem"], "dist": dist, "seed": seed}
    desc = " ".join(f"{k}={v}" for k, v in base.items())
    if tolerances:
        base_tol = {"tolerances": str(tolerances)}
    else:
        base_tol = {}
    if layout not in ("bhsd", "bshd"):
        raise N.AttestError(f"layout '{layout}' is not bhsd or bshd")
    unknown = set(checks) - {"accuracy", "bitwise", "determinism", "call_path"}
    if unknown:
        raise N.AttestError(f"checks {sorted(unknown)} are not accuracy, bitwise, determinism or call_path")
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    if cuda and not torch.cuda.is_available():
        raise N.AttestError(f"device '{device}': torch sees no CUDA device")
    if cuda and (dev.index or 0) != 0:
        # The library's own CUDA runtime works on device 0 (it does not follow torch's current device).
        raise N.AttestError(f"device '{device}': the device path runs on cuda:0 only (CUDA_VISIBLE_DEVICES selects the card)")
    if configs is None:
        configs = ("contig", "graph") if cuda else ("contig",)
    for cfg in configs:
        if cfg not in ("contig", "graph"):
            raise N.AttestError(f"config '{cfg}' is not contig or graph")
        if cfg == "graph" and not cuda:
            raise N.AttestError("config 'graph' needs a CUDA device")
    sample = {"sample_rows": sample_rows, "sample_macs": None if sample_macs is None else float(sample_macs),
              "causal": causal}
    _, plan = N.call("device_plan", problem=f["problem"], recipe=recipe, seed=seed, **sample)
    p = plan["problem"]
    stats = {"problem": p, "sample": plan.get("sample"), "kernel_s": 0.0, "calls": 0}
    if "refusal" in plan:  # judged as unsupported by the library (same reason), nothing allocated
        # Every requested check gets its UNSUPPORTED row, with the library's reason.
        _, rep = N.call("device_judge", **base, **base_tol, checks=list(checks), **sample)
        return DeviceResult(desc, rep["results"], rep["exit_code"], stats)
    stats["sample_repro"] = plan["sample"]["repro"]
    dt = getattr(torch, dtype or B.default_dtype(recipe))
    B_, S, T, H, Hk, D, Dv = p["batch"], p["seqlen_q"], p["seqlen_kv"], p["heads_q"], p["heads_kv"], p["head_dim"], p["head_dim_v"]
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        mem0 = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    q32 = torch.empty(B_, S, H, D, dtype=torch.float32, device=dev)
    k32 = torch.empty(B_, T, Hk, D, dtype=torch.float32, device=dev)
    v32 = torch.empty(B_, T, Hk, Dv, dtype=torch.float32, device=dev)
    N.call("device_generate", problem=f["problem"], dist=dist, seed=seed, q=view(q32), k=view(k32), v=view(v32))
    qk, kk, vk = (x.to(dt) for x in (q32, k32, v32))
    stats["generate_s"] = time.perf_counter() - t0
    to_layout = (lambda x: x.permute(0, 2, 1, 3)) if layout == "bhsd" else (lambda x: x)
    kw = dict(kwargs or {})
    is_causal = p["mask"] != "none"  # the library refused a mask this convention cannot express

    events = []  # (start, end) per call on the device: read once at the end (no sync per call)

    def call(q, k, v):
        if mutates_inputs:
            q, k, v = q.clone(), k.clone(), v.clone()
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
        else:
            c0 = time.perf_counter()
        o = _kernel_out(fn(q, k, v, causal=is_causal, scale=p["scale"], **kw))
        if cuda:
            e1.record()
            events.append((e0, e1))
        else:
            stats["kernel_s"] += time.perf_counter() - c0
        stats["calls"] += 1
        return to_layout(o)  # logical [B,S,H,Dv] view of the declared layout

    rows = []
    rc = 0
    qin, kin, vin = to_layout(qk), to_layout(kk), to_layout(vk)
    # The checks over repeated calls (determinism, call_path, input guard) go into one call log of
    # the library: comparisons and fingerprints are launched on torch's current stream after each
    # call and read back once, judged by the library at the end.
    stream = torch.cuda.current_stream(dev).cuda_stream if cuda else 0
    log = N.call("device_log_open", device=cuda, stream=stream)[1]["log"]
    names = ["q", "k", "v"]
    ins = {"q": view(qk), "k": view(kk), "v": view(vk)}  # the memory the callable gets (qin, kin, vin view it)

    def guarded(what, o):
        if not mutates_inputs:
            N.call("device_log_fingerprint", log=log, what=what, names=names, **ins)
        return o

    judged = False
    try:
        guarded("before call 1", None)
        out = guarded("call 1", call(qin, kin, vin))
        jchecks = [c for c in checks if c in ("accuracy", "bitwise")]
        if contract == "bitwise" and "accuracy" in checks and "bitwise" not in jchecks:
            jchecks.append("bitwise")
        if jchecks:
            if cuda:  # the reference runs on the library's stream: the kernel's output must be complete
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            extra = {} if scratch_bytes is None else {"scratch_bytes": int(scratch_bytes)}
            jrc, rep = N.call("device_judge", **base, **base_tol, checks=jchecks, **sample, **extra, q=view(q32), k=view(k32),
                              v=view(v32), out=view(out))
            stats["judge_s"] = time.perf_counter() - t0
            stats["coverage"] = rep.get("sample", {}).get("coverage")
            stats["complete"] = rep.get("sample", {}).get("complete_reference")
            rows += rep["results"]
            rc = max(rc, jrc)

        if operands is not None:
            orc, orow = _operands_row(operands, base, p, layout, kw, is_causal, stats, guarded, (qin, kin, vin),
                                      {"q": qk, "k": kk, "v": vk})
            rows.append(orow)
            rc = max(rc, orc)

        def same(check, what, other):
            c0 = time.perf_counter()
            N.call("device_log_compare", log=log, check=check, what=what, a=view(out), b=view(other))
            if cuda:
                # The comparison is queued on the log's stream and reads `other` later: whatever
                # stream the callable allocated it on, its memory is not reused before that.
                other.record_stream(torch.cuda.current_stream(dev))
            stats["compare_s"] = stats.get("compare_s", 0.0) + time.perf_counter() - c0

        if "determinism" in checks:
            for i in range(max(1, reruns)):
                same("determinism", f"call {i + 2}", guarded(f"call {i + 2}", call(qin, kin, vin)))
        if "call_path" in checks:
            for cfg in configs:
                if cfg == "contig":
                    o2 = guarded("contig call", call(*(x.contiguous() for x in (qin, kin, vin))))
                else:
                    gin = (x.clone() for x in (qin, kin, vin)) if mutates_inputs else (qin, kin, vin)
                    o2 = guarded("graph call", _graph_call(torch, fn, *gin, is_causal, p["scale"], kw, to_layout))
                same("call_path", cfg, o2)
                stats.setdefault("call_path_configs", []).append(cfg)
                del o2
        t0 = time.perf_counter()
        judged = True  # the close drops the log whatever happens: never close it twice
        lrc, lrep = N.call("device_log_close", log=log, **base)
        stats["log_close_s"] = time.perf_counter() - t0
        rows += lrep["results"]
        rc = max(rc, lrc)
    finally:
        if not judged:  # an exception on the way: drop the log unjudged
            N.call("device_log_close", log=log)
    stats["mutates_inputs"] = mutates_inputs
    if cuda:
        torch.cuda.synchronize()
        stats["kernel_s"] += sum(e0.elapsed_time(e1) for e0, e1 in events) / 1e3
        io = sum(x.numel() * x.element_size() for x in (qk, kk, vk)) + out.numel() * out.element_size()
        stats["peak_mem_bytes"] = torch.cuda.max_memory_allocated() - mem0
        stats["io_bytes"] = io
        stats["peak_mem_over_io"] = stats["peak_mem_bytes"] / io
    stats["wall_s"] = time.perf_counter() - t_start
    stats["harness_s"] = stats["wall_s"] - stats["kernel_s"]
    return DeviceResult(desc, rows, rc, stats)


def _operands_row(operands, base, p, layout, kw, is_causal, stats, guarded, ins, inputs) -> tuple:
    """Calls the kernel's operands function once on the case's inputs (input guard after it, as
    after every call) and has the library judge its codes, scales and km (check `operands`).
    Everything is copied to host memory first: the check runs on the host. -> (exit code, row)."""
    t0 = time.perf_counter()
    got = guarded("operands call", operands(*ins, causal=is_causal, scale=p["scale"], **kw))
    if not isinstance(got, dict) or not got or set(got) - {"q", "k", "v"}:
        raise N.AttestError(f"operands: the function returned {type(got).__name__} {list(got) if isinstance(got, dict) else ''}"
                            ", expected a dict with keys among q, k, v")
    # bhsd tensors are [B,H,S,D] as the library wants them; bshd ones [B,S,H,D] are permuted.
    hnd = (lambda x: x) if layout == "bhsd" else (lambda x: x.permute(0, 2, 1, 3))
    ops = []
    keep = []  # host copies alive until the library has read them
    for role, d in got.items():
        if not isinstance(d, dict) or "codes" not in d or "scales" not in d:
            raise N.AttestError(f"operands: '{role}' must be a dict with codes and scales (and mean for a smoothed K)")
        x = inputs[role].permute(0, 2, 1, 3)  # inputs are [B,S,H,D]: the library reads [B,H,S,D]
        items = {"input": x, "codes": hnd(d["codes"]), "scales": d["scales"].reshape(-1)}
        if d.get("mean") is not None:
            items["mean"] = hnd(d["mean"])
        entry = {"role": role}
        for key, t in items.items():
            h = t.detach().contiguous().cpu()
            keep.append(h)
            name = str(h.dtype).replace("torch.", "")
            if name not in ("int8", "uint8", "float8_e4m3fn", "float8_e5m2", "float32", "float16", "bfloat16"):
                raise N.AttestError(f"operands: {role} {key} is {h.dtype}, expected int8 / float8 / uint8 (codes) or a float dtype")
            entry[key] = {"ptr": int(h.data_ptr()), "dtype": name, "shape": list(h.shape), "strides": list(h.stride()),
                          "device": False}
        ops.append(entry)
    stats["operands_copy_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    orc, rep = N.call("device_operands", **base, scale=p["scale"], operands=ops)
    stats["operands_s"] = time.perf_counter() - t0
    del keep
    return orc, rep["results"][0]


def _graph_call(torch, fn, q, k, v, causal, scale, kw, to_layout):
    """The call captured into a CUDA graph on a side stream (warm-up first, as torch requires) and
    replayed once; the captured output is returned (it must equal eager). Captured on the case's own
    inputs, unlike the callback path's graph config (_bridge._graph_call: capture on other values,
    then copy the case's in), which would double the inputs' memory at these sizes; a replay that
    reads a stale copy of its inputs is therefore not caught here."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        _kernel_out(fn(q, k, v, causal=causal, scale=scale, **kw))
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        o = _kernel_out(fn(q, k, v, causal=causal, scale=scale, **kw))
    o.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    return to_layout(o)


def device_ladder(fn: Callable, *, recipe: str = "bf16", lengths: Sequence[int] = (1024, 4096, 16384, 65536, 131072),
                  heads: int = 2, head_dim: int = 128, rows: int = 128, blocks: int = 4, slope_margin: float = 0.15,
                  dist: str = "normal", seed: int = 1, device: str = "cuda", name: Optional[str] = None,
                  **kw) -> dict:
    """The sequence-length ladder (attest.ladder) on device-resident tensors: per length the
    accuracy of `blocks` sampled blocks of `rows` query rows against all keys (device_case), then
    the C++ slope verdict (op ladder_verdict) over the lengths."""
    table = []
    t0 = time.perf_counter()
    for L in lengths:
        desc = f"recipe={recipe} problem=b1h{heads}s{L}d{head_dim} dist={dist} seed={seed}"
        macs = blocks * rows * L * 2 * head_dim  # exactly `blocks` blocks of `rows` rows against L keys
        r = device_case(fn, desc, checks=("accuracy",), device=device, sample_rows=rows, sample_macs=macs,
                        name=name or "ladder", **kw)
        row = r.rows[0]
        e = {"length": L, "kv_tiles": (r.stats.get("sample") or {}).get("kv_tiles"), "verdict": row["verdict"],
             "reason": row.get("reason", ""), "seconds": r.stats["wall_s"], "kernel_seconds": r.stats["kernel_s"]}
        fig = row.get("figures", {}).get("out", {})
        if "measured" in fig:
            e.update(rel_l2=fig["measured"]["rel_l2"], budget_rel_l2=fig["budget"]["rel_l2"],
                     floor_rel_l2=fig["floor"]["rel_l2"], max_abs=fig["measured"]["max_abs"],
                     rows_sampled=(r.stats.get("sample") or {}).get("rows_sampled"))
        table.append(e)
    _, v = N.call("ladder_verdict", table=table, slope_margin=slope_margin)
    return {"kernel": name or "ladder", "recipe": recipe, "table": table, "slope": v["slope"], "verdict": v["verdict"],
            "reason": v["reason"], "exit_code": v["exit_code"], "seconds": time.perf_counter() - t0}
