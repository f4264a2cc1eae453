#!/usr/bin/env python3
"""The Python harness of scripts/device: what every driver shares, and the small tools the jobs of
scripts/device/run call.

For the drivers (python_package.py, torch_kernels.py, fp8.py, scale.py, complete.py), imported as
`import harness as H` (scripts/device is the script's folder, hence on sys.path):
  T0, left(budget)        the process's start and the seconds left of a budget
  log(...)                a line stamped with the seconds since T0
  Rows                    (job, what, verdict, detail) rows: record() prints one, table() is the
                          Markdown summary
  parser(budget, ...)     argparse with the shared --out / --budget / --device / --cases
  card(), torch_env()     the card found at run time (torch or nvidia-smi) and the torch/CUDA/Python record
  write_json, load_json   JSON results (written atomically: a time box can end a job at any moment)
  cases_file(name)        datasets/cases/<name>.cases of this checkout
  counts_text(res)        a gate result's counts, one line
  FLEX_CASES, flex_fn(...)            the FlexAttention cases and FlexAttention as a kernel function
  SAGE1, sage_recipe()                SageAttention 1.0.6's recipe
Tools (python3 scripts/device/harness.py TOOL ...):
  torch-fp64 OUTDIR [--b --h --s --t --d --iters]   torch float64 attention baseline -> OUTDIR/torch_fp64.json
  suite-summary OUT STEPS_JSON SECONDS             the suite job's summary.json
  perf-table OUT "NAME=RC ..." SECONDS             the perf job's table (summary.txt)
  mutants-table OUT CONTROL_RC                     the mutants job's table.md and exit code
  gate-engine GATE_DIR                             the complete job's gate_engine.json (block figures on gpu.*)
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from pathlib import Path

T0 = time.time()
ROOT = Path(__file__).resolve().parents[2]


def left(budget: float) -> float:
    return budget - (time.time() - T0)


def log(*a) -> None:
    print(f"[{time.time() - T0:6.1f} s]", *a, flush=True)


class Rows:
    """The drivers' result rows (job, what, verdict, detail), printed as they come."""

    def __init__(self):
        self.rows = []

    def record(self, job, what, verdict, detail=""):
        self.rows.append((job, what, verdict, detail))
        print(f"[{time.time() - T0:6.1f} s] {job:8s} {what:34s} {verdict:10s} {detail}", flush=True)

    def table(self) -> str:
        lines = ["| job | what | verdict | detail |", "|---|---|---|---|"]
        lines += [f"| {j} | {w} | {v} | {d.replace('|', '/')} |" for j, w, v, d in self.rows]
        return "\n".join(lines)

    def print_summary(self, title: str) -> None:
        print(f"\n== {title} summary")
        for j, w, v, d in self.rows:
            print(f"{j:8s} {w:36s} {v:10s} {d[:110]}")


def parser(budget: float, *, out_required=True, out_default=None, device=None, cases=None, doc=None):
    """The drivers' shared arguments: --out, --budget (seconds), --device, --cases (when given defaults)."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--out", required=out_required, default=out_default)
    ap.add_argument("--budget", type=float, default=budget)
    if device is not None:
        ap.add_argument("--device", default=device)
    if cases is not None:
        ap.add_argument("--cases", default=cases)
    return ap


def card() -> str:
    """The card this run found: torch's name for it, else nvidia-smi's, else "cpu"."""
    try:
        import torch  # noqa: PLC0415
        if torch.cuda.is_available():
            return torch.cuda.get_device_name()
    except Exception:  # noqa: BLE001
        pass
    return smi_card()


def smi_card() -> str:
    """The card's name from nvidia-smi (for a parent process that must not touch CUDA)."""
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30).stdout.strip().splitlines()[0]
    except Exception:  # noqa: BLE001
        return "cpu"


def torch_env(device_key="device", full_python=True) -> dict:
    import torch  # noqa: PLC0415
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            device_key: torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "python": sys.version if full_python else sys.version.split()[0]}


def write_json(path: Path, obj) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    tmp.replace(path)


def load_json(path: Path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def cases_file(name: str) -> Path:
    return ROOT / "datasets" / "cases" / f"{name}.cases"


def counts_text(res) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(res.counts().items()))


FLEX_CASES = """
problem=b1h2s256d64 dist=normal seed=1
problem=b1h2s256d64:mask=causal_tl dist=normal seed=1
problem=b2h4s512d128 dist=diffusion seed=2
"""


def flex_fn(name: str, compiled: bool, cache: dict):
    """FlexAttention as an attest kernel function fn(q, k, v, *, causal, scale), named `name`:
    eager, or through torch.compile (dynamic=False: every new shape or layout is a recompile).
    `cache` is shared by the functions of one job: the compiled op and one causal block mask per
    (S, T), so eager and compiled calls of a shape use the same mask and compile once."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: PLC0415

    def fn(q, k, v, *, causal, scale):
        f = flex_attention
        if compiled:
            if "compiled" not in cache:
                import torch  # noqa: PLC0415  (the tools of this file run without torch)
                cache["compiled"] = torch.compile(flex_attention, dynamic=False)
            f = cache["compiled"]
        bm = None
        if causal:
            key = (q.shape[2], k.shape[2])
            if key not in cache:
                cache[key] = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, key[0], key[1], device=q.device)
            bm = cache[key]
        return f(q, k, v, block_mask=bm, scale=scale, enable_gqa=q.shape[1] != k.shape[1])
    fn.__name__ = name
    return fn

# SageAttention 1.0.6 (Triton) fed float32 q/k/v (sageattn accepts them: Q/K quantized from the
# float32 values, K smoothed in float32, V cast to fp16, output float32). Read from its source
# (core.py, quant_per_block.py, attn_qk_int8_per_block*.py): Q blocks of 128 tokens pre-scaled by
# sm_scale * 1.44269504, K blocks of 64, scale amax/127, +-0.5 then truncation, P cast to fp16,
# V fp16, BLOCK_M 128 / BLOCK_N 64, acc / l at the end. Not modelled (docs/python.md): P.V of each
# 64-key tile is accumulated in FP16 (tl.dot(..., out_dtype=float16)) before it is added to the
# FP32 accumulator, the row sum is a tree sum, `/` and exp2 are Triton's approximate ones: the
# budget is therefore a lower bound on what the kernel's own arithmetic costs.
SAGE1 = ("q=int8:per_block=128:round=half:prescale=sm_log2e;k=int8:per_block=64:round=half:smooth=fp32;"
         "v=fp16;p=fp16;tile_q=128;tile_kv=64;out=f32;pv_acc=fp16")  # tl.dot(p, v, out_dtype=float16)


def sage_recipe() -> str:
    """sage1_int8_fp16 when this attest build has it, else the SAGE1 string."""
    import attest  # noqa: PLC0415
    names = {r["name"] for r in attest.list_items("recipes")}
    return "sage1_int8_fp16" if "sage1_int8_fp16" in names else SAGE1


# ---- tools -----------------------------------------------------------------------------------

def torch_fp64(argv) -> None:
    """Baseline for bench_gpu_ref64: torch float64 attention, softmax(Q K^T * scale) V, timed with
    CUDA events in the same device run. Writes OUTDIR/torch_fp64.json with the median time and
    TFLOP/s, counted as bench_gpu_ref64 counts them: 2 * (D + Dv) flops per (query, key) pair per
    head (no mask). The explicit form materialises the S x T logits (B*H*S*T*8 bytes: 12.9 GB at
    the default shape); torch's scaled_dot_product_attention in float64 (math backend) is timed
    too, for reference. Inputs are uniform [-1, 1), as in the C++ bench."""
    import torch  # noqa: PLC0415
    ap = argparse.ArgumentParser(prog="harness.py torch-fp64")
    ap.add_argument("outdir")
    ap.add_argument("--b", type=int, default=1)
    ap.add_argument("--h", type=int, default=24)
    ap.add_argument("--s", type=int, default=8192)
    ap.add_argument("--t", type=int, default=None)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args(argv)
    t = a.t or a.s
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(12345)
    q = torch.rand(a.b, a.h, a.s, a.d, dtype=torch.float64, device=dev, generator=g) * 2 - 1
    k = torch.rand(a.b, a.h, t, a.d, dtype=torch.float64, device=dev, generator=g) * 2 - 1
    v = torch.rand(a.b, a.h, t, a.d, dtype=torch.float64, device=dev, generator=g) * 2 - 1
    scale = a.d ** -0.5

    def explicit():
        return torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * scale, dim=-1) @ v

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)

    def timed(fn):
        fn()
        torch.cuda.synchronize()
        ms = []
        for _ in range(a.iters):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            torch.cuda.synchronize()
            ms.append(e0.elapsed_time(e1))
        return statistics.median(ms), min(ms)

    flops = 2.0 * (a.d + a.d) * a.b * a.h * a.s * t
    med, best = timed(explicit)
    res = {"bench": "torch.float64.softmax_qkT_v", "problem": f"b{a.b}h{a.h}s{a.s}" + (f"t{t}" if t != a.s else "") + f"d{a.d}",
           "torch": torch.__version__, "device": torch.cuda.get_device_name(dev), "iters": a.iters,
           "median_ms": med, "min_ms": best, "tflops": flops / (med * 1e-3) / 1e12}
    try:
        smed, _ = timed(sdpa)
        res["sdpa_median_ms"] = smed
        res["sdpa_tflops"] = flops / (smed * 1e-3) / 1e12
    except RuntimeError as e:  # out of memory or no float64 backend: keep the explicit result
        res["sdpa_error"] = str(e).splitlines()[0]
    out = pathlib.Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "torch_fp64.json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res))


def suite_summary(argv) -> None:
    """summary.json of the suite job: every step's status and the headline numbers."""
    out = pathlib.Path(argv[0])
    s = {"steps": json.loads(argv[1]), "wall_seconds": int(argv[2])}

    def load(name):
        p = out / name
        try:
            return json.loads(p.read_text())
        except Exception:  # noqa: BLE001
            return None
    ours, torch = load("bench_ref64.json"), load("torch_fp64.json")
    if ours and torch:
        s["ref64"] = {"problem": ours["problem"], "path": ours["path"], "ref64_ms": ours["median_ms"],
                      "ref64_tflops": ours["tflops"], "torch_ms": torch["median_ms"], "torch_tflops": torch["tflops"],
                      "speedup_vs_torch": torch["median_ms"] / ours["median_ms"], "goal_tflops": 40.0, "goal_speedup": 1.8}
    q = load("bench_quantize.json")
    if q:
        s["quantize"] = {"copy_gbs": q["copy_gbs"], "goal_fraction": q["goal_fraction"],
                         "schemes": {e["scheme"]: round(e["fraction_of_copy"], 3) for e in q["schemes"]}}
    g = load("gate/gate.json")
    if g:
        s["gate_counts"] = g.get("counts")
    (out / "summary.json").write_text(json.dumps(s, indent=2) + "\n")
    print(json.dumps(s, indent=2))


def perf_table(argv) -> None:
    """The perf job's table: test counts, quantizer GB/s over copy, ref64 vs torch, gpu.emu TFLOP/s."""
    out, rcs, secs = argv[0], argv[1].split(), argv[2]

    def load(n):
        try:
            return json.load(open(os.path.join(out, n)))
        except Exception:  # noqa: BLE001
            return None
    print(f"perf: {secs} s; steps: {' '.join(rcs)}")
    for n in ("test_quantize", "test_ref64", "test_emu"):
        j = load(n + ".json")
        if j:
            print(f"{n:16s} tests {j.get('tests')} failures {j.get('failures')} errors {j.get('errors')} disabled {j.get('disabled')}")
    q = load("bench_quantize.json")
    if q:
        copy = q.get("copy_gbs")
        print(f"{'copy':44s} {copy:8.0f} GB/s")
        for s in q.get("schemes", []):
            gbs = s.get("gbs") or s.get("GBs") or 0
            frac = gbs / copy if copy else float("nan")
            print(f"{s.get('scheme', '?')[:44]:44s} {gbs:8.0f} GB/s  {frac:5.3f} of copy  {'OK' if frac >= 0.75 else 'below 0.75'}")
    r, t = load("bench_ref64.json"), load("torch_fp64.json")
    if r:
        line = f"gpu.ref64 b1h24s8192d128 {r.get('tflops', 0):6.2f} TFLOP/s (goal 40)"
        if t and r.get("median_ms"):
            line += f"; torch fp64 {t.get('tflops', 0):6.2f} TFLOP/s; speed-up {t['median_ms'] / r['median_ms']:.2f}x (goal 1.8x)"
        print(line)
    e = load("bench_emu.json")
    if e:
        for row in (e if isinstance(e, list) else e.get("recipes", e.get("results", []))):
            if isinstance(row, dict):
                print(f"gpu.emu.{row.get('recipe', '?'):20s} {row.get('tflops', 0):7.3f} TFLOP/s")


def mutants_table(argv) -> int:
    """table.md of the mutants job (mutant | checks that caught it | first reason); 0 when every
    mutant fails a check and the control (gpu.ref64) passes every check."""
    out, control = argv[0], int(argv[1])
    caught, reason, kernels = collections.defaultdict(set), {}, set()
    for line in open(f"{out}/gate-mutants/results.jsonl"):
        r = json.loads(line)
        kernels.add(r["kernel"])
        if r["verdict"] not in ("passed", "unsupported"):
            caught[r["kernel"]].add(r["check"])
            reason.setdefault(r["kernel"], f'{r["check"]}: {r["reason"]}')
    want = {"mutant.gpu." + n for n in ("stale_replay", "legacy_stream", "oob_write", "race")}
    rows = ["| mutant | caught by (sm90 gate, smoke, graph_*/device_*) | first failure |", "|---|---|---|"]
    for k in sorted(want | kernels):
        rows.append(f'| {k} | {", ".join(sorted(caught[k])) or "(SURVIVED)"} | {reason.get(k, "").replace("|", "/")[:200]} |')
    open(f"{out}/table.md", "w").write("\n".join(rows) + "\n")
    print("\n".join(rows))
    ok = control == 0 and all(caught[k] for k in want)
    print("GPU mutants:", "every mutant caught, control clean" if ok else "NOT every mutant caught (or the control failed)")
    return 0 if ok else 1


def gate_engine(argv) -> None:
    """The complete job's gate_engine.json: gpu.* accuracy rows that carry the engine's block figures."""
    rows = [json.loads(ln) for ln in (pathlib.Path(argv[0]) / "results.jsonl").read_text().splitlines() if ln.strip()]
    acc = [r for r in rows if r.get("check") == "accuracy" and str(r.get("kernel", "")).startswith("gpu.")]
    with_blocks = [r for r in acc if (r.get("figures") or {}).get("blocks")]
    verdicts = {}
    for r in rows:
        verdicts[r.get("verdict")] = verdicts.get(r.get("verdict"), 0) + 1
    print(json.dumps({"rows": len(rows), "verdicts": verdicts, "gpu_accuracy_rows": len(acc),
                      "gpu_accuracy_rows_with_block_figures": len(with_blocks),
                      "kernels": sorted({r.get("kernel") for r in acc})}))


TOOLS = {"torch-fp64": torch_fp64, "suite-summary": suite_summary, "perf-table": perf_table,
         "mutants-table": mutants_table, "gate-engine": gate_engine}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in TOOLS:
        print(__doc__)
        print(f"harness.py: name a tool: {', '.join(TOOLS)}", file=sys.stderr)
        return 2
    return TOOLS[sys.argv[1]](sys.argv[2:]) or 0


if __name__ == "__main__":
    sys.exit(main())
