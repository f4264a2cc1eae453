#!/usr/bin/env python3
"""The Python package on the GPU (issue 15), driven by `scripts/device/run python-package`
(results in $OUT/python-h200, the folder's name since issue 15).

Jobs, each skipped once the time budget (--budget seconds) is spent, results under --out:
  sdpa        torch SDPA flash, cuDNN, efficient, math x bf16, fp16 through attest.gate (smoke)
  flex        FlexAttention eager vs torch.compile: attest.pair (accuracy) + gate of the compiled one
  sage        sageattention 1.0.6 judged under its recipe (sage1_int8_fp16 when this build has it)
  broken      a wrapper with a pointer-keyed stale buffer: the graph configs must fail call_path
  ladder      sequence-length ladder up to 128k tokens (flash bf16, sage)
  merge       K/V in 2/4/8 shards through the flash op that returns the LSE
  overhead    harness calls per second vs the kernel's own time
The last lines printed are a short table (also summary.md).
--device cpu runs the same driver on the CPU with the math backend (a dry run of the plumbing).
"""
from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

import attest
import harness as H
from harness import FLEX_CASES, counts_text, left, sage_recipe

ROWS = H.Rows()
record = ROWS.record


def failed_checks(res):
    out = {}
    for r in res.failures:
        out[r["check"]] = out.get(r["check"], 0) + 1
    return ",".join(f"{k}:{v}" for k, v in sorted(out.items())) or "-"


# ---- SDPA backends ----

def sdpa_backend(backend):
    from torch.nn.attention import sdpa_kernel  # noqa: PLC0415

    def fn(q, k, v, *, causal, scale):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
                                                  enable_gqa=q.shape[1] != k.shape[1])
    fn.__name__ = f"sdpa_{backend.name.lower()}"
    return fn


def probing_supports(fn, device, dtype):
    """supports(): the backend's own refusal, asked on zero tensors of the problem's shape (cached)."""
    cache = {}

    def supports(p):
        key = (p["batch"], p["heads_q"], p["heads_kv"], p["seqlen_q"], p["seqlen_kv"], p["head_dim"], p["head_dim_v"],
               p["mask"])
        if key not in cache:
            b, h, hk, s, t, d, dv, mask = key
            if mask == "causal_br":
                cache[key] = "causal_br is not what torch's is_causal means"
            else:
                try:
                    z = lambda *sh: torch.zeros(*sh, device=device, dtype=dtype)  # noqa: E731
                    fn(z(b, h, s, d), z(b, hk, t, d), z(b, hk, t, dv), causal=mask == "causal_tl", scale=0.1)
                    cache[key] = None
                except Exception as e:  # noqa: BLE001
                    cache[key] = f"backend refuses: {str(e).splitlines()[0][:200]}"
        return cache[key]
    return supports


def job_sdpa(args, out):
    from torch.nn.attention import SDPBackend  # noqa: PLC0415
    backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                SDPBackend.MATH] if args.device == "cuda" else [SDPBackend.MATH]
    summary = {}
    for be in backends:
        for rec, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            if left(args.budget) < 60:
                record("sdpa", f"{be.name} {rec}", "skipped", "time budget")
                continue
            fn = sdpa_backend(be)
            try:
                res = attest.gate(fn, oracles="host", recipe=rec, device=args.device, cases=args.cases,
                                  supports=probing_supports(fn, args.device, dt),
                                  out=out / "sdpa" / f"{be.name.lower()}_{rec}", name=f"{fn.__name__}_{rec}")
                summary[f"{be.name}_{rec}"] = {"exit_code": res.exit_code, "counts": res.counts(), "seconds": res.seconds,
                                               "stats": res.stats, "failed_checks": failed_checks(res)}
                record("sdpa", f"{be.name} {rec}", "PASSED" if res.passed else "FAILED",
                       f"{counts_text(res)} fails[{failed_checks(res)}] {res.seconds:.1f} s")
            except Exception as e:  # noqa: BLE001
                record("sdpa", f"{be.name} {rec}", "crash", str(e)[:200])
                traceback.print_exc()
    (out / "sdpa" / "summary.json").write_text(json.dumps(summary, indent=1))


# ---- FlexAttention ----

def job_flex(args, out):
    if left(args.budget) < 90:
        record("flex", "eager vs compile", "skipped", "time budget")
        return
    cache = {}
    eager, comp = H.flex_fn("flex_eager", False, cache), H.flex_fn("flex_compiled", True, cache)
    try:
        rc, results = attest.pair(eager, comp, contract="accuracy", recipe="bf16", device=args.device,
                                  cases_text=FLEX_CASES, configs=())
        (out / "flex").mkdir(parents=True, exist_ok=True)
        (out / "flex" / "pair_accuracy.json").write_text(json.dumps(results, indent=1))
        record("flex", "eager vs compile (accuracy)", "PASSED" if rc == 0 else "FAILED",
               "; ".join(f"{r['problem']}: {r['verdict']}" for r in results)[:300])
        rc, results = attest.pair(eager, comp, contract="bitwise", recipe="bf16", device=args.device,
                                  cases_text=FLEX_CASES, configs=())
        (out / "flex" / "pair_bitwise.json").write_text(json.dumps(results, indent=1))
        record("flex", "eager vs compile (bitwise)", "equal" if rc == 0 else "differ",
               "; ".join(f"{r['problem']}: {r['verdict']}" for r in results)[:300])
        # Few checks: every new layout or shape is a recompile (dynamo's limit is 8 per function).
        res = attest.gate(comp, oracles="host", recipe="bf16", device=args.device, cases_text=FLEX_CASES, masks=("none", "causal_tl"),
                          head_dim_v=False, cross=False, check="accuracy,determinism,poison", configs=(),
                          out=out / "flex" / "gate_compiled")
        record("flex", "compiled through gate", "PASSED" if res.passed else "FAILED",
               f"{counts_text(res)} fails[{failed_checks(res)}]")
    except Exception as e:  # noqa: BLE001
        record("flex", "eager vs compile", "crash", str(e)[:200])
        traceback.print_exc()


# ---- SageAttention ----

def job_sage(args, out):
    if args.device != "cuda":
        record("sage", "sageattention 1.0.6", "skipped", "needs CUDA")
        return
    if left(args.budget) < 60:
        record("sage", "sageattention 1.0.6", "skipped", "time budget")
        return
    try:
        from sageattention.core import sageattn  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001
        record("sage", "import", "crash", str(e)[:200])
        return
    recipe = sage_recipe()
    if recipe is None:
        record("sage", "recipe", "missing", "this build has no sage1_int8_fp16 recipe")
        return

    def sage(q, k, v, *, causal, scale):
        return sageattn(q, k, v, tensor_layout="HND", is_causal=causal, sm_scale=scale)

    def supports(p):
        if p["head_dim"] not in (64, 96, 128):
            return "sageattn supports head_dim 64, 96, 128"
        if p["mask"] == "causal_tl" and p["seqlen_q"] != p["seqlen_kv"]:
            return "sageattn's causal mask needs qo_len == kv_len"
        return None

    common = dict(recipe=recipe, device="cuda", dtype="float32", masks=("none", "causal_tl"), head_dim_v=False,
                  supports=supports)
    try:
        # As shipped: sageattn subtracts the K mean from k in place (k -= km); attest's input guard says so.
        res = attest.gate(sage, oracles="host", cases=args.cases, check="accuracy", name="sage_as_shipped", **common)
        reasons = {r["reason"][:160] for r in res.failures}
        record("sage", "as shipped (inputs guarded)", "PASSED" if res.passed else "FAILED",
               f"{counts_text(res)} {'; '.join(sorted(reasons))[:200]}")
        res = attest.gate(sage, oracles="host", cases=args.cases, mutates_inputs=True, out=out / "sage" / "gate", name="sage", **common)
        record("sage", f"gate under {recipe}", "PASSED" if res.passed else "FAILED",
               f"{counts_text(res)} fails[{failed_checks(res)}] {res.seconds:.1f} s")
    except Exception as e:  # noqa: BLE001
        record("sage", "gate", "crash", str(e)[:200])
        traceback.print_exc()


# ---- broken wrapper ----

class StaleBuffer:
    """A wrapper that keeps a converted copy of K per input pointer and reconverts only when the
    pointer changes: eager calls get new buffers, so they look right; inside a captured graph the
    pointer never changes, the copy is not part of the graph, and a replay on new inputs reads
    the K of the capture."""

    def __init__(self, inner):
        self.inner = inner
        self.ptr = None
        self.k = None
        self.__name__ = "stale_k_buffer"

    def __call__(self, q, k, v, *, causal, scale):
        if self.ptr != k.data_ptr():
            self.k = k.clone()
            self.ptr = k.data_ptr()
        return self.inner(q, self.k, v, causal=causal, scale=scale)


BROKEN_CASES = """
problem=b1h2s256d64 dist=normal seed=1
problem=b2h4s128t384d128 dist=diffusion seed=3
"""


def job_broken(args, out):
    if args.device != "cuda" or left(args.budget) < 30:
        record("broken", "stale K buffer wrapper", "skipped", "needs CUDA" if args.device != "cuda" else "time budget")
        return
    from torch.nn.attention import SDPBackend  # noqa: PLC0415
    fn = StaleBuffer(sdpa_backend(SDPBackend.FLASH_ATTENTION))
    res = attest.gate(fn, oracles="host", recipe="bf16", device="cuda", cases_text=BROKEN_CASES, check="call_path",
                      out=out / "broken" / "gate")
    reasons = [r["reason"] for r in res.failures]
    ok = not res.passed and any("graph" in r for r in reasons)
    record("broken", "stale K buffer: call_path must fail", "CAUGHT" if ok else "MISSED",
           (reasons[0] if reasons else "no failure")[:240])


# ---- ladder ----

def job_ladder(args, out):
    from torch.nn.attention import SDPBackend  # noqa: PLC0415
    lengths = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072] if args.device == "cuda" else [256, 512, 1024, 2048]
    backend = SDPBackend.FLASH_ATTENTION if args.device == "cuda" else SDPBackend.MATH
    (out / "ladder").mkdir(parents=True, exist_ok=True)
    jobs = [("flash_bf16", sdpa_backend(backend), dict(recipe="bf16"))]
    if args.device == "cuda" and sage_recipe():
        from sageattention.core import sageattn  # noqa: PLC0415

        def sage(q, k, v, *, causal, scale):
            return sageattn(q, k, v, tensor_layout="HND", is_causal=causal, sm_scale=scale)
        jobs.append(("sage", sage, dict(recipe=sage_recipe(), dtype="float32", mutates_inputs=True)))
    for name, fn, kw in jobs:
        if left(args.budget) < 45:
            record("ladder", name, "skipped", "time budget")
            continue
        budget_lengths = [n for n in lengths if n <= args.max_len]
        rep = attest.ladder(fn, lengths=budget_lengths, heads=2, head_dim=128, device=args.device, configs=(),
                            name=f"ladder_{name}", **kw)
        (out / "ladder" / f"{name}.json").write_text(json.dumps(rep, indent=1))
        (out / "ladder" / f"{name}.md").write_text(f"# ladder: {name} ({rep['recipe']})\n\n" + attest.format_ladder(rep) + "\n")
        print(attest.format_ladder(rep), flush=True)
        s = rep["slope"]
        f = lambda x: f"{x:.3f}" if isinstance(x, (int, float)) else str(x)  # noqa: E731 (None: no slope fitted)
        record("ladder", f"{name} up to {max(budget_lengths)}", rep["verdict"].upper(),
               f"slope {f(s.get('kernel'))} (emu {f(s.get('budget'))}, thr {f(s.get('threshold'))})")


# ---- merge ----

def job_merge(args, out):
    if args.device != "cuda" or left(args.budget) < 20:
        record("merge", "flash (out, lse) 2/4/8 shards", "skipped", "needs CUDA" if args.device != "cuda" else "time budget")
        return

    def flash_lse(q, k, v, *, causal, scale):
        r = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
        return r[0], r[1]
    try:
        rc, results = attest.merge(flash_lse, recipe="bf16", device="cuda", problem="b1h4s512t4096d128", gqa=False,
                                   head_dim_v=False, configs=())
        (out / "merge").mkdir(parents=True, exist_ok=True)
        (out / "merge" / "flash.json").write_text(json.dumps(results, indent=1))
        record("merge", "flash (out, lse) 2/4/8 shards", "PASSED" if rc == 0 else "FAILED",
               "; ".join(f"{r['check']}: {r['verdict']} {r['reason'][:80]}" for r in results))
    except Exception as e:  # noqa: BLE001
        record("merge", "flash (out, lse)", "crash", str(e)[:200])


# ---- overhead ----

def job_overhead(args, out):
    if left(args.budget) < 15:
        record("overhead", "harness vs kernel", "skipped", "time budget")
        return
    from torch.nn.attention import SDPBackend  # noqa: PLC0415
    be = SDPBackend.FLASH_ATTENTION if args.device == "cuda" else SDPBackend.MATH
    fn = sdpa_backend(be)
    table = []
    for problem in ("b1h8s1024d128", "b1h8s4096d128", "b2h16s8192d128") if args.device == "cuda" else ("b1h2s256d64",):
        desc = f"kernel=py.overhead recipe=bf16 problem={problem} dist=normal seed=1 check=determinism"
        t0 = time.time()
        attest.run_case(fn, desc, oracles="host", reruns=20, device=args.device, name="overhead", configs=())
        wall = time.time() - t0
        st = attest._BOUND["py.overhead"].spec.stats
        calls, fn_s, br = st["calls"], st["fn_seconds"], st["bridge_seconds"]
        if calls == 0:  # every call failed: nothing to time (the gate's rows say why)
            record("overhead", problem, "no call", f"no successful call in {wall:.1f} s")
            table.append({"problem": problem, "calls": 0, "wall_s": wall, "error": "no successful call"})
            continue
        table.append({"problem": problem, "calls": calls, "wall_s": wall, "kernel_s": fn_s, "bridge_s": br,
                      "calls_per_s": calls / wall, "kernel_ms_per_call": 1e3 * fn_s / max(calls, 1),
                      "bridge_ms_per_call": 1e3 * br / max(calls, 1),
                      "harness_ms_per_call": 1e3 * (wall - fn_s) / max(calls, 1)})
        record("overhead", problem, f"{calls / wall:.1f}/s",
               f"kernel {1e3 * fn_s / calls:.3f} ms, bridge {1e3 * br / calls:.2f} ms, harness total "
               f"{1e3 * (wall - fn_s) / calls:.2f} ms per call ({calls} calls)")
    (out / "overhead.json").write_text(json.dumps(table, indent=1))


def main():
    ap = H.parser(270, device="cuda" if torch.cuda.is_available() else "cpu", cases="smoke", doc=__doc__)
    ap.add_argument("--max-len", type=int, default=131072)
    ap.add_argument("--jobs", default="sdpa,broken,merge,overhead,ladder,sage,flex")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = H.torch_env()
    (out / "environment.json").write_text(json.dumps(env, indent=1))
    print(json.dumps(env), flush=True)
    jobs = {"sdpa": job_sdpa, "flex": job_flex, "sage": job_sage, "broken": job_broken, "ladder": job_ladder,
            "merge": job_merge, "overhead": job_overhead}
    for name in args.jobs.split(","):
        try:
            jobs[name](args, out)
        except Exception as e:  # noqa: BLE001
            record(name, "job", "crash", str(e)[:200])
            traceback.print_exc()
    (out / "summary.md").write_text("# python-package\n\n" + ROWS.table() + f"\n\ntotal {time.time() - H.T0:.0f} s\n")
    ROWS.print_summary("python-package")
    print(f"total {time.time() - H.T0:.0f} s")


if __name__ == "__main__":
    main()
