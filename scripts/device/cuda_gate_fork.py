"""The callback gate with the CUDA libattest_py under forked workers (issue 33): the library must
not initialise the CUDA driver in the parent, or every later forked worker's CUDA call fails
("CUDA driver initialization failed", error rows blamed on the kernel).

Two gates in one process: the first forks its worker before the C++ gate runs, the second forks
after the first gate's C++ run, so a driver initialised by that run breaks the second's worker.
Then a fork of the parent must still run a CUDA op. Exit 0 when all holds; prints a JSON summary.

Run on the GPU machine with the CUDA bundle (scripts/device/build py-cuda), carry build/py-cuda-bundle:
  scripts/device/run fork-gate        ($OUT/cuda_gate_fork.json; by hand:
  PYTHONPATH=build/py-cuda-bundle python3 scripts/device/cuda_gate_fork.py [OUT.json])
"""
from __future__ import annotations

import json
import os
import sys

import torch
import torch.nn.functional as F

import attest


def sdpa(q, k, v, *, causal, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)


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


def main() -> int:
    if not torch.cuda.is_available():  # is_available() asks NVML, not the driver: no context
        print("cuda_gate_fork: torch sees no CUDA device", file=sys.stderr)
        return 2
    os.environ.pop("ATTEST_WORKER_START", None)  # auto: fork while the parent has no CUDA context
    summary: dict = {"fork_before": fork_can_use_cuda(), "gates": []}
    declared = dict(attest.probe(sdpa, device="cuda"))  # the given device="cuda" plus what it learned
    summary["declared"] = {k: repr(v) for k, v in declared.items()}
    for i in range(2):
        # oracles="host": the forked-worker path under test (device oracles run gpu.ref64 in this
        # process and therefore spawn their workers; scripts/device/python_path.py covers them).
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
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
