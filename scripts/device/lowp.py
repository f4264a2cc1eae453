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
  plants planted FP8 bugs on cuDNN FP8 at the first shape, accuracy only (fp8_plants()): each must
         fail by the check meant for it
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


def fp8_plants():
    """Planted FP8 bugs (issue 34's list, where the cuDNN FP8 kernel can carry them):
    p_quantized_e5m2_not_e4m3  fp8.py's p_e5m2: the graph's FP8 type E5M2 (P, and Q, K, V, O with it)
    v_fp8_scale_applied_twice_in_one_head  V's per-tensor descale multiplied once more into head 20's output"""
    import fp8  # noqa: PLC0415
    import torch  # noqa: PLC0415
    e5m2 = fp8.Fp8Sdpa("cudnn", bug="p_e5m2")

    def v_twice(q, k, v, *, causal=False, scale=None):
        out, lse = fp8.cudnn_fp8_sdpa(q, k, v, causal=causal, scale=scale)
        dv = v.float().abs().amax() / fp8.FP8_MAX[fp8.E4M3]
        out = out.clone()
        out[:, 20] = out[:, 20] * dv  # bhsd: head 20 (a middle head of 40)
        return out, lse
    v_twice.__name__ = "cudnn_fp8_v_scale_twice_head20"
    _ = torch
    return [("p_quantized_e5m2_not_e4m3", "accuracy", e5m2), ("v_fp8_scale_applied_twice_in_one_head", "accuracy", v_twice)]


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
    ap.add_argument("--seeds", default="1", help="seeds per shape (false-alarm runs), e.g. 2,3,4")
    args = ap.parse_args()
    out = Path(args.out)
    import attest  # noqa: PLC0415
    import torch  # noqa: PLC0415
    res: dict = {"card": H.card(), "torch": torch.__version__, "runs": [], "goals": {}}

    def save():
        H.write_json(out / "lowp.json", res)

    for job in args.run.split(","):
        if job == "plants":
            shape = args.shapes.split(",")[0]
            try:
                plants = fp8_plants()
                import fp8  # noqa: PLC0415
                recipe = fp8.recipe_name()
            except Exception as e:  # noqa: BLE001
                res["runs"].append({"job": job, "error": f"{type(e).__name__}: {e}"[:400]})
                continue
            res.setdefault("planted", [])
            for name, expected, fn in plants:
                if left(args.budget) < 45:
                    res["planted"].append({"name": name, "expected_check": expected, "failed_by": None,
                                           "skipped": "time budget"})
                    continue
                t0 = time.perf_counter()
                try:
                    r = attest.device_case(fn, f"recipe={recipe} problem={shape} dist=normal seed=1", dtype="float32",
                                           configs=("contig",), name=name, checks=("accuracy",))
                    failed = [x["check"] for x in r.rows if x["verdict"] not in ("passed", "unsupported", "accepted")]
                    res["planted"].append({"name": name, "problem": shape, "expected_check": expected,
                                           "failed_by": failed[0] if failed else None, "failed_checks": failed,
                                           **brief(r), "seconds": round(time.perf_counter() - t0, 1)})
                except Exception as e:  # noqa: BLE001
                    res["planted"].append({"name": name, "expected_check": expected, "failed_by": None,
                                           "error": f"{type(e).__name__}: {e}"[:600]})
                H.log(f"plant {name}: {res['planted'][-1].get('failed_by')} {res['planted'][-1].get('reasons')}")
                save()
            continue
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
        for shape, seed in [(sh, int(se)) for sh in args.shapes.split(",") for se in args.seeds.split(",")]:
            if left(args.budget) < 60:
                res["runs"].append({"job": job, "shape": shape, "seed": seed, "skipped": "time budget"})
                break
            H.log(f"{job} {shape} seed {seed} under {recipe[:40]}")
            t0 = time.perf_counter()
            try:
                # Sage 1.0.6 is handed copies (mutates_inputs): the torch_kernels gate's declaration.
                r = attest.device_case(fn, f"recipe={recipe} problem={shape} dist=normal seed={seed}", dtype=dtype,
                                       configs=("contig",), name=f"{job}_{shape}", mutates_inputs=job == "sage")
                row = {"job": job, "shape": shape, "seed": seed, "recipe": recipe, **brief(r), "rows": r.rows}
            except Exception as e:  # noqa: BLE001
                row = {"job": job, "shape": shape, "seed": seed, "recipe": recipe, "error": f"{type(e).__name__}: {e}"[:600],
                       "trace": traceback.format_exc()[-1500:]}
            row["seconds"] = round(time.perf_counter() - t0, 1)
            H.log(f"  -> {row.get('verdicts') or row.get('error')} {row['seconds']} s")
            res["runs"].append(row)
            if shape == WAN and "verdicts" in row and f"{job}_wan_s" not in res["goals"]:
                res["goals"][f"{job}_wan_s"] = row.get("wall_s")
            save()
            torch.cuda.empty_cache()
    save()
    print({k: res[k] for k in ("card", "goals")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
