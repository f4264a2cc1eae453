"""The Python path on the GPU (issue 33): the callback gate with device="cuda" judged on the
device engine (FP64 reference by gpu.ref64, emulator on planned blocks, comparisons on the
device), with the CUDA libattest_py of build/py-cuda-bundle (scripts/device/build py-cuda).

Writes one JSON (argv[1]) with:
  card, torch, attest_gpu_backend
  cuda_build_gate       {error_rows, passed, counts, seconds, oracles}: torch SDPA, cases="smoke",
                        device="cuda", isolate=True, declarations from attest.probe, host oracles
  cuda_build_gate_device  the same gate with oracles="device" (the two routes' verdicts compared)
  spawned_closure_gate  {error_rows, counts, methods}: CUDA initialised in this process first,
                        then a closure with supports=lambda gated on smoke: workers are spawned
  pair_flash_cudnn      {failed_rows, counts}: attest.pair of SDPA forced to FLASH_ATTENTION vs
                        CUDNN_ATTENTION, contract="accuracy", smoke, declarations per side
  casefile_s            seconds of the gate on docs/results/python-path/cases.txt with every check
                        (the goal: <= 30 s on an H100) with oracles="device", with casefile {counts,
                        passed, ...}; casefile_host_s / casefile_host: the same with host oracles
Each part runs in its own try/except (an error string instead of its figures); the JSON is
rewritten after every part, so a run stopped by a time limit keeps what finished.

  PYTHONPATH=build/py-cuda-bundle python3 scripts/device/python_path.py $OUT/python_path.json

`python_path.py fork-gate OUT.json` (scripts/device/run fork-gate): the gate under forked workers
with oracles="host": no CUDA driver initialised in the parent on behalf of the callback gate.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

import attest
from attest import _native

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "docs" / "results" / "python-path" / "cases.txt"
BAD = ("error", "fault")


def sdpa(q, k, v, *, causal, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1])


def sdpa_backend(name: str):
    # The backend by name, looked up at call time: a closure over the SDPBackend enum member
    # itself does not pickle (pybind11_static_property), and spawned probes and workers need it to.
    def fn(q, k, v, *, causal, scale):
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415

        with sdpa_kernel(getattr(SDPBackend, name)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
                                                  enable_gqa=q.shape[1] != k.shape[1])
    fn.__name__ = f"sdpa_{name.lower()}"
    return fn


def counts(res) -> dict:
    return res.report.get("counts") or res.counts()


def error_rows(results) -> int:
    return sum(1 for r in results if r.get("verdict") in BAD)


def first_problems(results, n=5) -> list:
    return [f"{r.get('check')} {r.get('problem')} {r.get('dist')}: {r.get('verdict')}: {str(r.get('reason'))[:240]}"
            for r in results if r.get("verdict") not in ("passed", "unsupported", "accepted")][:n]


def oracles_line(res) -> str:
    return next((line for line in res.summary.splitlines() if line.startswith("oracles:")), "")


def check_seconds(results) -> dict:
    s: dict = {}
    for r in results:
        s[r["check"]] = round(s.get(r["check"], 0.0) + float(r.get("seconds") or 0.0), 2)
    return s


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("python_path.json")
    summary: dict = {"torch": torch.__version__}
    t_all = time.perf_counter()

    def save():
        summary["total_s"] = round(time.perf_counter() - t_all, 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(summary, indent=1) + "\n")

    def part(name, f):
        t0 = time.perf_counter()
        try:
            summary[name] = f()
        except BaseException as e:  # noqa: BLE001 (one part's failure must not lose the others)
            summary[name] = {"error": f"{type(e).__name__}: {e}"[:2000], "trace": traceback.format_exc()[-2000:]}
        summary.setdefault("part_s", {})[name] = round(time.perf_counter() - t0, 1)
        print(f"== {name} [{summary['part_s'][name]} s]: {json.dumps(summary[name])[:600]}", flush=True)
        save()

    def card():
        # Asked at the end as well: get_device_name() initialises CUDA in this process, and the
        # first parts should start their workers and probes the way a user's fresh process does.
        try:
            summary["card"] = torch.cuda.get_device_name()
        except BaseException as e:  # noqa: BLE001
            summary["card"] = f"error: {e}"

    summary["card"] = None
    try:
        summary["attest_gpu_backend"] = _native.gpu_backend()
    except BaseException as e:  # noqa: BLE001
        summary["attest_gpu_backend"] = f"error: {e}"
    save()
    declared: dict = {}

    def cuda_build_gate(oracles="host"):
        if not declared:
            declared.update(dict(attest.probe(sdpa, device="cuda")))
        t0 = time.perf_counter()
        res = attest.gate(sdpa, cases="smoke", name="sdpa_smoke", oracles=oracles, **declared)
        secs = time.perf_counter() - t0
        return {"error_rows": error_rows(res.results), "passed": res.passed, "counts": counts(res),
                "seconds": round(secs, 1), "oracles": oracles_line(res) or oracles,
                "methods": sorted({w["method"] for w in res.report.get("workers", [])}),
                "declared": {k: repr(v) for k, v in declared.items()}, "problems": first_problems(res.results)}

    def spawned_closure_gate():
        torch.ones(1, device="cuda")  # CUDA initialised in this process: workers must be spawned
        card()
        scale_mul = 1.0  # captured: the callable is a closure, not a module-level function

        def closure_sdpa(q, k, v, *, causal, scale):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale * scale_mul,
                                                  enable_gqa=q.shape[1] != k.shape[1])
        decl = {k: v for k, v in declared.items() if k not in ("supports", "name")}
        decl.setdefault("device", "cuda")
        res = attest.gate(closure_sdpa, cases="smoke", name="closure_sdpa",
                          supports=lambda p: None if p["head_dim"] <= 256 else "head_dim > 256", **decl)
        return {"error_rows": error_rows(res.results), "counts": counts(res), "passed": res.passed,
                "methods": sorted({w["method"] for w in res.report.get("workers", [])}),
                "seconds": round(res.seconds, 1), "problems": first_problems(res.results)}

    def pair_flash_cudnn():
        a, b = sdpa_backend("FLASH_ATTENTION"), sdpa_backend("CUDNN_ATTENTION")
        da, db = dict(attest.probe(a, device="cuda")), dict(attest.probe(b, device="cuda"))
        t0 = time.perf_counter()
        rc, results = attest.pair(a, b, contract="accuracy", device="cuda", cases="smoke", declared_a=da, declared_b=db)
        c: dict = {}
        for r in results:
            c[r["verdict"]] = c.get(r["verdict"], 0) + 1
        return {"failed_rows": sum(1 for r in results if r["verdict"] not in ("passed", "unsupported", "accepted")),
                "counts": c, "exit_code": rc, "seconds": round(time.perf_counter() - t0, 1),
                "problems": first_problems(results)}

    def casefile(oracles="device"):
        if not declared:
            declared.update(dict(attest.probe(sdpa, device="cuda")))
        t0 = time.perf_counter()
        res = attest.gate(sdpa, cases=str(CASES), name="sdpa_long", oracles=oracles, **declared)
        secs = time.perf_counter() - t0
        key = "casefile_s" if oracles == "device" else f"casefile_{oracles}_s"
        summary[key] = round(secs, 1)
        # Every row with its figures (the engine's timing_s per row says where the seconds went).
        (out.parent / f"casefile_{oracles}_rows.json").write_text(json.dumps(res.results, indent=1, default=str) + "\n")
        return {"seconds": round(secs, 1), "counts": counts(res), "passed": res.passed, "oracles": oracles,
                "error_rows": error_rows(res.results), "oracles_line": oracles_line(res),
                "check_seconds": check_seconds(res.results), "stats": res.stats,
                "slowest": [f"{r['check']} {r['problem']} {r.get('dist')}: {float(r.get('seconds') or 0):.2f} s {r['verdict']}"
                            for r in sorted(res.results, key=lambda r: -float(r.get("seconds") or 0))[:12]],
                "problems": first_problems(res.results, 10)}

    # The host-oracle gate first (the default route), then the case file on the device engine (the
    # goal's number) and on the host, the same smoke gate on the device engine (the two routes'
    # verdicts side by side), then the parts that need CUDA in this process.
    parts = {"cuda_build_gate": cuda_build_gate, "casefile": casefile, "casefile_host": lambda: casefile("host"),
             "cuda_build_gate_device": lambda: cuda_build_gate("device"), "spawned_closure_gate": spawned_closure_gate,
             "pair_flash_cudnn": pair_flash_cudnn}
    # PARTS=a,b,...: these parts in this order (a call with little device time left); default: all.
    for name in (os.environ.get("PARTS") or ",".join(parts)).split(","):
        part(name, parts[name])
    card()
    summary.setdefault("casefile_s", None)
    save()
    print(json.dumps({k: summary[k] for k in ("card", "casefile_s", "total_s")}))
    return 0



def fork_can_use_cuda() -> bool:
    pid = os.fork()
    if pid == 0:
        try:
            ok = torch.ones(4, device="cuda").sum().item() == 4.0
        except Exception:  # noqa: BLE001 (the child reports by exit code)
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def fork_gate(out_path) -> int:
    """The callback gate with the CUDA libattest_py under forked workers: the library must not
    initialise the CUDA driver in the parent, or every later forked worker's CUDA call fails.
    Two gates in one process (the second forks after the first gate's C++ run), then a fork of
    the parent must still run a CUDA op. Exit 0 when all holds."""
    if not torch.cuda.is_available():  # is_available() asks NVML, not the driver: no context
        print("python_path fork-gate: torch sees no CUDA device", file=sys.stderr)
        return 2
    os.environ.pop("ATTEST_WORKER_START", None)  # auto: fork while the parent has no CUDA context
    summary: dict = {"fork_before": fork_can_use_cuda(), "gates": []}
    declared = dict(attest.probe(sdpa, device="cuda"))  # the given device="cuda" plus what it learned
    summary["declared"] = {k: repr(v) for k, v in declared.items()}
    for i in range(2):
        # oracles="host": the forked-worker path under test (device oracles run gpu.ref64 in this
        # process and therefore spawn their workers; the main mode of this script covers them).
        res = attest.gate(sdpa, cases="smoke", name=f"sdpa_fork{i}", oracles="host", **declared)
        counts = res.report["counts"]
        errors = [r["reason"][:200] for r in res.report["results"] if r["verdict"] in ("error", "fault")][:3]
        summary["gates"].append({"backend": res.report["meta"].get("backend"), "counts": counts,
                                 "methods": sorted({w["method"] for w in res.report["workers"]}),
                                 "first_errors": errors, "seconds": round(res.seconds, 1)})
    summary["parent_cuda_initialized"] = torch.cuda.is_initialized()
    summary["fork_after"] = fork_can_use_cuda()
    with open("/proc/self/maps") as f:  # informational: a driver the parent loaded shows here
        summary["parent_maps_libcuda"] = any("libcuda.so" in line for line in f)
    ok = (summary["fork_before"] and summary["fork_after"] and not summary["parent_cuda_initialized"]
          and all(g["backend"] == "cuda" and g["methods"] == ["fork"] and g["counts"]["error"] == 0
                  and g["counts"]["fault"] == 0 for g in summary["gates"]))
    summary["ok"] = ok
    text = json.dumps(summary, indent=1)
    print(text)
    with open(out_path, "w") as f:
        f.write(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "fork-gate":
        sys.exit(fork_gate(sys.argv[2]))
    sys.exit(main())
