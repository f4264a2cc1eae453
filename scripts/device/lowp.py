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
  plants fp8_plants then sage_plants (each also a job of its own), at the first shape, accuracy
         only; each plant must fail by the check meant for it. A plant counts as caught only when
         that check's verdict is "failed" (failed_by); an "error" verdict is attest's own failure,
         recorded under "error", never a catch
  fp8_plants   planted FP8 bugs on cuDNN FP8 (fp8_plants()), dist=normal seed 1; first an unplanted
         control (cuDNN FP8 itself, its wrapper's FP8 operands under `operands`)
  sage_plants  the Sage-internal plants (sage_plants.py: sageattn 1.0.6's own pipeline and Triton
         kernels with one step changed: K scales per tensor, smooth-K mean of one block, the last
         partial K block's scale from the previous block), each judged by accuracy and by check
         `operands` (the plant's codes, scales and km against the recipe quantizer: the check meant
         for the two quantizer plants that stay inside Sage's output noise), fp16 inputs, dist from --plant-dist
         (default diffusion: DiT-like K with per-channel offsets, outlier channels and outlier
         tokens, the structure smooth-K and per-block scales exist for; on normal K the mean is ~0
         and block scales vary little), seed 1; first an unplanted control, sageattn itself on the
         same inputs (its own quantizer under `operands`), under "plant_controls"
  --sage-operands  the sage job also judges sageattn's own quantizer (check `operands`) at each shape;
         --dist sets the sage / fp8 jobs' dist (default normal), --seeds their seeds
Writes OUT/lowp.json: card, torch, per (job, shape) {verdicts, reasons, wall_s, judge_s, kernel_s,
coverage, sample, rows}, goals sage_wan_s / fp8_wan_s (the Wan 720p wall time; goal <= 60 s),
planted [{name, kernel, problem, dist, seed, expected_check, failed_by, verdicts, accuracy_figures, ...}]
and plant_controls.
e.g. scripts/device/run lowp -- --run plants --shapes b1h40s75600d128
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
    # p_e5m2 changes the graph's one FP8 type: P is internal, but Q, K and V then reach the kernel as
    # E5M2 codes with descale amax / 57344, which check `operands` sees (accuracy cannot: an E5M2
    # kernel stays inside twice the E4M3 noise floor, wan/lowp_run9.json).
    return [("p_quantized_e5m2_not_e4m3", "operands", e5m2, e5m2.operands),
            ("v_fp8_scale_applied_twice_in_one_head", "accuracy", v_twice, None)]


def sage_plants():
    """The Sage-internal plants of issue 34 (scripts/device/sage_plants.py): judged by accuracy
    and by `operands` (the plant's own codes, scales and km against the recipe quantizer). The
    per-tensor K scale is meant for accuracy (it moves the output beyond the budget); the two
    quantizer plants that stay inside Sage's noise on the output are meant for `operands`."""
    import sage_plants as SP  # noqa: PLC0415  (scripts/device/sage_plants.py)
    meant = {"k_scales_per_tensor_not_per_block": "accuracy"}
    return [(n, meant.get(n, "operands"), SP.plant_fn(n), SP.operands_fn(n)) for n in SP.PLANTS]


def brief(r) -> dict:
    return {"verdicts": {x["check"]: x["verdict"] for x in r.rows},
            "reasons": {x["check"]: x.get("reason", "") for x in r.rows if x["verdict"] != "passed"},
            **{k: r.stats.get(k) for k in ("wall_s", "judge_s", "kernel_s", "generate_s", "harness_s", "coverage",
                                            "peak_mem_over_io", "calls")},
            "sample": r.stats.get("sample"),
            "accuracy_figures": next((x.get("figures") for x in r.rows if x["check"] == "accuracy"), None),
            "operands_figures": next((x.get("figures") for x in r.rows if x["check"] == "operands"), None),
            **{k: r.stats.get(k) for k in ("operands_s", "operands_copy_s") if k in r.stats}}


def judge_plant(fn, expected, base: dict, *, dtype, mutates_inputs=False, operands=None, checks=("accuracy",)) -> dict:
    """One plant (or control, expected None) judged by accuracy only. Caught (failed_by) only when
    the expected check's verdict is "failed": an "error" verdict is attest failing to judge, not a
    catch, and is recorded under "error"."""
    import attest  # noqa: PLC0415
    desc = f"recipe={base['recipe']} problem={base['problem']} dist={base['dist']} seed={base['seed']}"
    t0 = time.perf_counter()
    try:
        r = attest.device_case(fn, desc, dtype=dtype, configs=("contig",), name=base["name"], checks=checks,
                               mutates_inputs=mutates_inputs, operands=operands)
        row = {**base, **brief(r)}
        v = row["verdicts"]
        row["failed_by"] = expected if expected and v.get(expected) == "failed" else None
        row["failed_checks"] = [c for c, x in v.items() if x == "failed"]
        errors = {c: row["reasons"].get(c, "") for c, x in v.items() if x == "error"}
        if errors:
            row["error"] = errors
    except Exception as e:  # noqa: BLE001
        row = {**base, "failed_by": None, "error": f"{type(e).__name__}: {e}"[:600], "trace": traceback.format_exc()[-1500:]}
    row["seconds"] = round(time.perf_counter() - t0, 1)
    H.log(f"plant {base['name']} ({base['dist']}): failed_by {row.get('failed_by')} {row.get('verdicts') or ''} "
          f"{row.get('reasons') or ''} {row.get('error') or ''}")
    return row


def run_plants(job, args, res, save) -> None:
    """fp8_plants / sage_plants at the first shape: rows appended to res["planted"] (and the Sage
    control to res["plant_controls"])."""
    shape = args.shapes.split(",")[0]
    try:
        if job == "fp8_plants":
            import fp8  # noqa: PLC0415
            kernel, recipe, dtype, dists = "cuDNN FP8 SDPA (fp8.py)", fp8.recipe_name(), "float32", ["normal"]
            # cuDNN itself on the plants' inputs, its wrapper's own FP8 operands under `operands`.
            plants, control = fp8_plants(), ("cudnn_fp8_unplanted", fp8.cudnn_fp8_sdpa, fp8._PLAIN.operands)
        else:
            kernel, recipe, dtype, dists = "sageattention 1.0.6 (sage_plants.py)", H.sage_recipe(), "float16", \
                args.plant_dist.split(",")
            import sage_plants as SP  # noqa: PLC0415
            plants, control = sage_plants(), ("sage1_unplanted", sage_fn(), SP.operands_fn(None))
        if args.plants:
            plants = [p for p in plants if p[0] in args.plants.split(",")]
    except Exception as e:  # noqa: BLE001
        res["runs"].append({"job": job, "error": f"{type(e).__name__}: {e}"[:400]})
        save()
        return
    res.setdefault("planted", [])
    # --plant-checks none: only what the call itself yields (operands, input guard): a short run.
    checks = () if args.plant_checks == "none" else tuple(args.plant_checks.split(","))
    for dist in dists:
        base = {"kernel": kernel, "problem": shape, "dist": dist, "seed": 1, "recipe": recipe}
        if control and left(args.budget) >= 45:
            # The unplanted kernel on the plants' inputs: a catch means something only where this passes.
            res.setdefault("plant_controls", []).append(
                judge_plant(control[1], None, {"name": control[0], **base}, dtype=dtype, mutates_inputs=job == "sage_plants",
                            operands=control[2], checks=checks))
            save()
        for name, expected, fn, ops in plants:
            row = {"name": name, **base, "expected_check": expected}
            if left(args.budget) < 45:
                res["planted"].append({**row, "failed_by": None, "skipped": "time budget"})
                continue
            res["planted"].append(judge_plant(fn, expected, row, dtype=dtype, operands=ops, checks=checks))
            save()


def main() -> int:
    ap = H.parser(540, device="cuda", doc=__doc__)
    ap.add_argument("--run", default="sage,fp8")
    ap.add_argument("--shapes", default=f"{WAN},{WAN480}")
    ap.add_argument("--seeds", default="1", help="seeds per shape (false-alarm runs), e.g. 2,3,4")
    ap.add_argument("--dist", default="normal", help="dist of the sage / fp8 jobs")
    ap.add_argument("--plant-checks", default="accuracy", help="checks of each plant and control ('none': operands only)")
    ap.add_argument("--plants", default="", help="only these plants (comma list of names; default every one)")
    ap.add_argument("--sage-operands", action="store_true", help="the sage job also judges sageattn's quantizer (operands)")
    ap.add_argument("--plant-dist", default="diffusion", help="dist of the Sage plants and their control, e.g. "
                    "diffusion,normal (each plant on each)")
    args = ap.parse_args()
    out = Path(args.out)
    import attest  # noqa: PLC0415
    import torch  # noqa: PLC0415
    res: dict = {"card": H.card(), "torch": torch.__version__, "runs": [], "goals": {}}

    def save():
        H.write_json(out / "lowp.json", res)

    jobs = [j for job in args.run.split(",") for j in (("fp8_plants", "sage_plants") if job == "plants" else (job,))]
    for job in jobs:
        if job in ("fp8_plants", "sage_plants"):
            run_plants(job, args, res, save)
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
                # Sage's own quantizer is judged too (check `operands`, --sage-operands).
                ops = None
                if job == "sage" and args.sage_operands:
                    import sage_plants as SP  # noqa: PLC0415
                    ops = SP.operands_fn(None)
                r = attest.device_case(fn, f"recipe={recipe} problem={shape} dist={args.dist} seed={seed}", dtype=dtype,
                                       configs=("contig",), name=f"{job}_{shape}", mutates_inputs=job == "sage",
                                       operands=ops)
                row = {"job": job, "shape": shape, "seed": seed, "dist": args.dist, "recipe": recipe, **brief(r), "rows": r.rows}
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
