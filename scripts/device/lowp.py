#!/usr/bin/env python3
"""Issue 34 on the GPU: low-precision kernels judged on the device engine at video shapes.
`scripts/device/run lowp` (carry build/py-cuda-bundle and .whl) runs it.

Jobs (each time-boxed; a failure or refusal of one is recorded and the next runs):
  sage   sageattention 1.0.6 (Triton, INT8 QK^T per block with smooth-K, FP16 P.V) under its
         recipe (harness.sage_recipe()) at Wan 2.1 720p (b1h40s75600d128) and 480p
         (b1h40s32760d128), fp16 inputs: accuracy (every output row against FP64; the budget from
         the recipe emulator on the planned blocks, against the whole problem's quantization) +
         determinism + call_path (contig)
  fp8    cuDNN FP8 SDPA (nvidia-cudnn-frontend 1.32, scripts/device/fp8.py's cudnn_fp8_sdpa) under
         cudnn_fp8_e4m3 at the same shapes, the same checks
Writes OUT/lowp.json: card, torch, per (job, shape) {verdicts, reasons, wall_s, judge_s, kernel_s,
coverage, sample, rows} and goals sage_wan_s / fp8_wan_s (the Wan 720p wall time; goal <= 60 s).
"""
from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

import harness as H
from harness import left

WAN = "b1h40s75600d128"
WAN480 = "b1h40s32760d128"


def sage_fn():
    def sage(q, k, v, *, causal, scale):
        from sageattention.core import sageattn  # noqa: PLC0415
        return sageattn(q, k, v, tensor_layout="HND", is_causal=causal, sm_scale=scale)
    return sage


def fp8_fn():
    import fp8  # noqa: PLC0415  (scripts/device/fp8.py)
    return fp8.cudnn_fp8_sdpa, fp8.recipe_name()


def brief(r) -> dict:
    return {"verdicts": {x["check"]: x["verdict"] for x in r.rows},
            "reasons": {x["check"]: x.get("reason", "") for x in r.rows if x["verdict"] != "passed"},
            **{k: r.stats.get(k) for k in ("wall_s", "judge_s", "kernel_s", "generate_s", "harness_s", "coverage",
                                            "peak_mem_over_io", "calls")},
            "sample": r.stats.get("sample"),
            "accuracy_figures": next((x.get("figures") for x in r.rows if x["check"] == "accuracy"), None)}


def main() -> int:
    ap = H.parser(540, device="cuda", doc=__doc__)
    ap.add_argument("--run", default="sage,fp8")
    ap.add_argument("--shapes", default=f"{WAN},{WAN480}")
    args = ap.parse_args()
    out = Path(args.out)
    import attest  # noqa: PLC0415
    import torch  # noqa: PLC0415
    res: dict = {"card": H.card(), "torch": torch.__version__, "runs": [], "goals": {}}

    def save():
        H.write_json(out / "lowp.json", res)

    for job in args.run.split(","):
        try:
            if job == "sage":
                fn, recipe, dtype = sage_fn(), H.sage_recipe(), "float16"
            elif job == "fp8":
                (fn, recipe), dtype = fp8_fn(), "float32"
            else:
                raise ValueError(f"unknown job {job}")
        except Exception as e:  # noqa: BLE001
            res["runs"].append({"job": job, "error": f"{type(e).__name__}: {e}"[:400]})
            save()
            continue
        for shape in args.shapes.split(","):
            if left(args.budget) < 60:
                res["runs"].append({"job": job, "shape": shape, "skipped": "time budget"})
                break
            H.log(f"{job} {shape} under {recipe[:40]}")
            t0 = time.perf_counter()
            try:
                # Sage 1.0.6 is handed copies (mutates_inputs): the torch_kernels gate's declaration.
                r = attest.device_case(fn, f"recipe={recipe} problem={shape} dist=normal seed=1", dtype=dtype,
                                       configs=("contig",), name=f"{job}_{shape}", mutates_inputs=job == "sage")
                row = {"job": job, "shape": shape, "recipe": recipe, **brief(r), "rows": r.rows}
            except Exception as e:  # noqa: BLE001
                row = {"job": job, "shape": shape, "recipe": recipe, "error": f"{type(e).__name__}: {e}"[:600],
                       "trace": traceback.format_exc()[-1500:]}
            row["seconds"] = round(time.perf_counter() - t0, 1)
            H.log(f"  -> {row.get('verdicts') or row.get('error')} {row['seconds']} s")
            res["runs"].append(row)
            if shape == WAN and "verdicts" in row:
                res["goals"][f"{job}_wan_s"] = row.get("wall_s")
            save()
            torch.cuda.empty_cache()
    save()
    print({k: res[k] for k in ("card", "goals")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
