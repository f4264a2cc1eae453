#!/usr/bin/env python3
"""Issue 26 on the GPU: the device-resident path at real shapes (`scripts/device/run scale` runs it
after the benchmarks, in one device call; results in $OUT/gpu-scale).

Jobs (each time-boxed; results land in OUT whatever the others do):
  overhead  harness time per gated call vs kernel time, torch SDPA flash bf16, check=determinism
            with 20 reruns (the issue's measure) on the issue's problems plus b1h24s8192d128, then
            b1h24s8192d128 with accuracy + determinism + call_path; the old callback path
            (run_case, host copies) on the two smallest, side by side in the same run
  wan       one Wan 2.1 14B 720p self-attention call (b1h40s75600d128): accuracy + determinism +
            call_path, wall time and peak device memory over the kernel's own inputs and output
  ladder    attest.device_ladder, flash bf16, 1k..128k tokens, 2 heads, d128: seconds and slope verdict
  planted   the same path on planted bugs at a real length (dropped last key, NaN outside the
            sample, a bf16 running sum): each must fail by the expected check
Writes OUT/scale.json (every figure) and prints a summary.
"""
from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import attest
import harness as H
from harness import T0, left


def flash(q, k, v, *, causal, scale):
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def per_call(r):
    """Harness seconds per call beyond the kernel, excluding the reference's and the emulator's own
    arithmetic (the issue's measure), and the parts."""
    st = r.stats
    t = {}
    for row in r.rows:
        t = row.get("figures", {}).get("sample", {}).get("timing_s", t) or t
    ref_s = t.get("reference", 0.0) + t.get("emulator", 0.0)
    calls = max(1, st["calls"])
    harness = st["wall_s"] - st["kernel_s"] - ref_s
    return {"calls": st["calls"], "wall_s": st["wall_s"], "kernel_ms_per_call": 1e3 * st["kernel_s"] / calls,
            "harness_ms_per_call": 1e3 * harness / calls, "harness_over_kernel": harness / max(st["kernel_s"], 1e-12),
            "reference_s": t.get("reference"), "emulator_s": t.get("emulator"), "gather_s": t.get("gather"),
            "scan_s": t.get("scan"), "generate_s": st.get("generate_s"), "judge_s": st.get("judge_s"),
            "compare_s": st.get("compare_s"), "peak_mem_over_io": st.get("peak_mem_over_io"),
            "peak_mem_bytes": st.get("peak_mem_bytes"), "io_bytes": st.get("io_bytes"),
            "verdicts": {row["check"]: row["verdict"] for row in r.rows},
            "reasons": {row["check"]: row.get("reason", "") for row in r.rows if row.get("reason")},
            "sample": {k: v for k, v in (st.get("sample") or {}).items() if k != "blocks"}}


def job_overhead(res, budget):
    # The measure, like for like with its table (python_package.py's overhead job): one case,
    # check=determinism, 20 reruns; harness = wall - kernel, per call. Then the same problem with
    # accuracy + determinism + call_path, whose fixed cost (the sampled reference and emulator,
    # their gathers, graph capture) is reported beside it.
    table = []
    # Warm-up (torch's and the library's first-call costs), not recorded.
    attest.device_case(flash, "recipe=bf16 problem=b1h8s1024d128 dist=normal seed=1", checks=("determinism",), reruns=2,
                       name="flash")
    runs = [(p, ("determinism",)) for p in ("b1h8s1024d128", "b1h8s4096d128", "b2h16s8192d128", "b1h24s8192d128")]
    runs.append(("b1h24s8192d128", ("accuracy", "determinism", "call_path")))
    for problem, checks in runs:
        if left(budget) < 40:
            table.append({"problem": problem, "checks": list(checks), "skipped": "time budget"})
            continue
        r = attest.device_case(flash, f"recipe=bf16 problem={problem} dist=normal seed=1", checks=checks, reruns=20,
                               name="flash")
        e = {"problem": problem, "path": "device", "checks": list(checks), **per_call(r)}
        table.append(e)
        print(f"overhead {problem} {'+'.join(checks)}: kernel {e['kernel_ms_per_call']:.3f} ms, harness "
              f"{e['harness_ms_per_call']:.3f} ms per call ({e['harness_over_kernel']:.3f}x), {e['verdicts']}", flush=True)
        torch.cuda.empty_cache()
    # The callback path (host copies, CPU reference and emulator), same card, same run.
    for problem in ("b1h8s1024d128", "b1h8s4096d128"):
        if left(budget) < 60:
            break
        desc = f"kernel=py.flash_host recipe=bf16 problem={problem} dist=normal seed=1 check=determinism"
        t = time.time()
        attest.run_case(flash, desc, reruns=20, device="cuda", name="flash_host", configs=())
        wall = time.time() - t
        st = attest._BOUND["py.flash_host"].spec.stats
        calls = max(1, st["calls"])
        table.append({"problem": problem, "path": "callback (host copies)", "calls": st["calls"], "wall_s": wall,
                      "kernel_ms_per_call": 1e3 * st["fn_seconds"] / calls,
                      "harness_ms_per_call": 1e3 * (wall - st["fn_seconds"]) / calls,
                      "harness_over_kernel": (wall - st["fn_seconds"]) / max(st["fn_seconds"], 1e-12)})
        print(f"overhead (callback) {problem}: {table[-1]}", flush=True)
    res["overhead"] = table


def job_wan(res, budget):
    if left(budget) < 90:
        res["wan"] = {"skipped": "time budget"}
        return
    t = time.time()
    r = attest.device_case(flash, "recipe=bf16 problem=b1h40s75600d128 dist=normal seed=1", reruns=1, name="flash")
    e = {"problem": "b1h40s75600d128", "seconds": time.time() - t, **per_call(r), "markdown": r.markdown(),
         "repro": r.repro_line()}
    res["wan"] = e
    print(f"wan: {e['seconds']:.1f} s, {e['verdicts']}, peak/io {e['peak_mem_over_io']}", flush=True)
    print(r.markdown(), flush=True)
    torch.cuda.empty_cache()


def job_ladder(res, budget):
    if left(budget) < 60:
        res["ladder"] = {"skipped": "time budget"}
        return
    rep = attest.device_ladder(flash, lengths=(1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072), heads=2,
                               head_dim=128, name="flash")
    res["ladder"] = rep
    print(attest.format_ladder(rep), flush=True)
    print(f"ladder: {rep['seconds']:.1f} s, {rep['verdict']}", flush=True)
    torch.cuda.empty_cache()


def drop_last_key(q, k, v, *, causal, scale):
    return flash(q, k[:, :, :-1], v[:, :, :-1], causal=causal, scale=scale)


def drop_middle_tile(q, k, v, *, causal, scale):
    keep = torch.ones(k.shape[2], dtype=torch.bool, device=k.device)
    keep[16384:16448] = False  # one 64-key tile in the middle of the sequence never reaches the softmax
    return flash(q, k[:, :, keep], v[:, :, keep], causal=causal, scale=scale)


def nan_outside(q, k, v, *, causal, scale):
    o = flash(q, k, v, causal=causal, scale=scale)
    o[0, 1, 3001, 5] = float("nan")  # one element of head 1 (bhsd), in no sampled block of this case
    return o


def bf16_running_sum(q, k, v, *, causal, scale):
    """Flash on 4096-key chunks, the partial results merged in bfloat16: error grows with length."""
    out, lse = None, None
    for j in range(0, k.shape[2], 4096):
        o, l = torch.ops.aten._scaled_dot_product_flash_attention(q, k[:, :, j:j + 4096], v[:, :, j:j + 4096], 0.0,
                                                                   False, False, scale=scale)[:2]
        if out is None:
            out, lse = o, l
        else:
            m = torch.maximum(lse, l)
            a, b = torch.exp(lse - m), torch.exp(l - m)
            out = ((out * a[..., None] + o * b[..., None]) / (a + b)[..., None]).to(torch.bfloat16)
            lse = m + torch.log(a + b)
    return out


def job_planted(res, budget):
    out = []
    for fn, expect in ((drop_last_key, "accuracy"), (drop_middle_tile, "accuracy"), (nan_outside, "accuracy")):
        if left(budget) < 30:
            out.append({"bug": fn.__name__, "skipped": "time budget"})
            continue
        r = attest.device_case(fn, "recipe=bf16 problem=b1h4s32768d128 dist=normal seed=1", checks=("accuracy",),
                               name=fn.__name__)
        row = r.rows[0]
        caught = row["verdict"] in ("failed", "mistrusted") and row["check"] == expect
        out.append({"bug": fn.__name__, "check": row["check"], "verdict": row["verdict"], "reason": row.get("reason", ""),
                    "caught": caught, "seconds": r.stats["wall_s"]})
        print(f"planted {fn.__name__}: {row['verdict']} {row.get('reason', '')[:160]}", flush=True)
    # Error that grows with length (a bfloat16 running merge of 4096-key partials): every length
    # may sit inside its bound; the ladder's slope must catch it.
    if left(budget) >= 45:
        rep = attest.device_ladder(bf16_running_sum, lengths=(4096, 8192, 16384, 32768, 65536), heads=2, head_dim=128,
                                   name="bf16_running_sum")
        print(attest.format_ladder(rep), flush=True)
        out.append({"bug": "bf16_running_sum (ladder)", "check": "ladder_slope", "verdict": rep["verdict"],
                    "reason": rep["reason"], "slope": rep["slope"], "caught": rep["verdict"] == "failed",
                    "seconds": rep["seconds"], "table": rep["table"]})
    else:
        out.append({"bug": "bf16_running_sum (ladder)", "skipped": "time budget"})
    res["planted"] = out


_load = H.load_json


def summarize(res_dir: Path) -> dict:
    """summary.json: the card and the issue's goals, each {name, goal, measured, unit, met} (measured
    None where the run produced no figure: the log says why)."""
    scale = _load(res_dir / "scale.json") or {}
    ref = _load(res_dir / "bench_ref64.json") or {}
    tfp = _load(res_dir / "torch_fp64.json") or {}
    qz = _load(res_dir / "bench_quantize.json") or {}
    emu = _load(res_dir / "bench_emu.json") or {}
    goals = []

    def goal(name, target, measured, unit, met, **more):
        goals.append({"name": name, "goal": target, "measured": measured, "unit": unit,
                      "met": bool(met) if measured is not None else False, **more})

    ov = {e["problem"]: e for e in scale.get("overhead", [])
          if isinstance(e, dict) and e.get("path") == "device" and e.get("checks") == ["determinism"]}
    full = [e for e in scale.get("overhead", []) if isinstance(e, dict) and e.get("path") == "device"
            and e.get("problem") == "b1h24s8192d128" and len(e.get("checks", [])) == 3]
    e = ov.get("b1h24s8192d128", {})
    m = e.get("harness_over_kernel")
    goal("harness_over_kernel_s8192", 0.2, m, "harness s / kernel s per gated call (b1h24s8192d128)",
         m is not None and m <= 0.2, kernel_ms_per_call=e.get("kernel_ms_per_call"),
         harness_ms_per_call=e.get("harness_ms_per_call"), checks="determinism, 20 reruns (the issue's table)",
         with_accuracy_and_call_path=full[0].get("harness_over_kernel") if full else None,
         note="harness = wall - kernel, excluding the sampled reference's and emulator's own time "
              "(with accuracy: reference_s + emulator_s in scale.json)")
    lad = scale.get("ladder", {})
    m = lad.get("seconds")
    goal("ladder_131072_s", 120, m, "s", m is not None and m <= 120 and lad.get("verdict") in ("passed", "failed"),
         verdict=lad.get("verdict"), slope=lad.get("slope"))
    wan = scale.get("wan", {})
    m = wan.get("seconds")
    goal("wan_call_s", 60, m, "s (accuracy + determinism + call_path, b1h40s75600d128)",
         m is not None and m <= 60 and "error" not in (wan.get("verdicts") or {"": "error"}).values(),
         verdicts=wan.get("verdicts"))
    m = ref.get("tflops")
    ratio = m / tfp["tflops"] if m and tfp.get("tflops") else None
    goal("ref64_tflops", 40, m, "TFLOP/s (b1h24s8192d128, FP64)", m is not None and m >= 40 and (ratio or 0) >= 1.8,
         torch_fp64_tflops=tfp.get("tflops"), over_torch=ratio)
    fr = [x.get("fraction_of_copy") for x in qz.get("schemes", []) if x.get("fraction_of_copy") is not None]
    m = min(fr) if fr else None
    goal("quantize_copy_fraction", 0.75, m, "slowest scheme's GB/s over a device copy's", m is not None and m >= 0.75,
         schemes={x["scheme"]: x.get("fraction_of_copy") for x in qz.get("schemes", [])})
    tf = [x.get("tflops") for x in (emu if isinstance(emu, list) else emu.get("results", [])) if x.get("tflops")]
    m = min(tf) if tf else None
    goal("emu_tflops", 8, m, "TFLOP/s, slowest gpu.emu recipe (b1h16s4096d128)", m is not None and m >= 8,
         recipes={x["recipe"]: x.get("tflops") for x in (emu if isinstance(emu, list) else emu.get("results", []))})
    m = wan.get("peak_mem_over_io")
    goal("peak_mem_over_io", 4, m, "peak device memory of the gated Wan call / kernel inputs + output", m is not None and m <= 4,
         note="torch's allocator peak; the library's own device scratch (one slice's keys, the sampled reference rows) "
              "is under 1% of it")
    summary = {"card": scale.get("card") or ref.get("device"), "torch": scale.get("torch"), "goals": goals}
    (res_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    for g in goals:
        print(f"{g['name']:28s} goal {g['goal']!s:6s} measured {g['measured']!s:24.24s} {'MET' if g['met'] else 'missed'}")
    return summary


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--summarize":
        summarize(Path(sys.argv[2]))
        return
    ap = H.parser(420, doc=__doc__)
    ap.add_argument("--jobs", default="overhead,wan,ladder,planted")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = H.torch_env(device_key="card", full_python=False)
    print(json.dumps(res), flush=True)
    jobs = {"overhead": job_overhead, "wan": job_wan, "ladder": job_ladder, "planted": job_planted}
    for name in args.jobs.split(","):
        try:
            jobs[name](res, args.budget)
        except Exception as e:  # noqa: BLE001 (one job's crash must not void the others)
            res[name] = {"crash": f"{type(e).__name__}: {e}"[:500]}
            traceback.print_exc()
        (out / "scale.json").write_text(json.dumps(res, indent=1, default=str))
    print(f"scale: {time.time() - T0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
