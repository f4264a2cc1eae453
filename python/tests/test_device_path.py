"""The device-resident path (issue 26) on host tensors: the same C++ code that judges device
buffers on a GPU (sampling, the gate's accuracy rule on the sample, the whole-output NaN/Inf scan,
bitwise comparisons of reruns and call paths), fed torch CPU tensors. The control kernel is
attention in float64 rounded once to the input dtype (bits independent of the CPU); the planted
bugs wrap it. Each test asserts attest's conclusion about what the wrapper did."""
import itertools

import pytest
import torch

import attest
from attest import _device as D
from attest import _native as N


def exact(q, k, v, *, causal, scale, bottom_right=False):
    """The correct control kernel: attention in float64 (GQA by repeating K/V heads), rounded once
    to the input dtype; a causal mask top-left, or bottom-right when asked."""
    q64, k64, v64 = (x.double() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    if g > 1:
        k64, v64 = k64.repeat_interleave(g, 1), v64.repeat_interleave(g, 1)
    s = (q64 @ k64.transpose(-1, -2)) * scale
    if causal:
        S, T = s.shape[-2:]
        s = s.masked_fill(torch.ones(S, T, dtype=torch.bool).triu(1 + (T - S if bottom_right else 0)), float("-inf"))
    return (torch.softmax(s, -1) @ v64).to(q.dtype)


def exact_br(q, k, v, *, causal, scale):
    return exact(q, k, v, causal=causal, scale=scale, bottom_right=True)


def case(fn, problem, **kw):
    kw.setdefault("sample_macs", 2 ** 22)
    return attest.device_case(fn, f"recipe=bf16 problem={problem} dist=normal seed=1", device="cpu", **kw)


def verdicts(res):
    return {r["check"]: r["verdict"] for r in res.rows}


def plan(problem, **kw):
    args = dict(recipe="bf16", seed=1, sample_rows=64, sample_macs=2.0 ** 22)
    args.update(kw)
    return N.call("device_plan", problem=problem, **args)[1]


def test_small_problem_is_judged_completely():
    p = plan("b2h2s200d64", sample_macs=2.0 ** 30)
    s = p["sample"]
    # 200 rows in blocks of 64: 4 blocks per (batch, head), every one of them.
    assert s["complete"] and s["slices"] == 2 * 2 * 4 and s["rows_sampled"] == s["rows_total"] == 800
    assert s["macs_sampled"] == s["macs_total"] == 2 * 2 * 200 * 200 * 128


def test_large_problem_sample_covers_every_kv_tile_and_is_named_by_its_seed():
    a = plan("b2h8s3000d64", seed=7, sample_macs=2.0 ** 27)["sample"]
    assert not a["complete"]
    blocks = [tuple(b) for b in a["blocks"]]
    # First block of (batch 0, head 0) and the last (partial) block of the last head: every key
    # and the partial last KV tile are seen.
    assert (0, 0, 0, 64) in blocks and (1, 7, 2944, 3000) in blocks
    assert a["kv_tiles"] == a["kv_tiles_covered"] == (3000 + 63) // 64
    assert a["macs_sampled"] <= a["max_macs"]
    assert a["macs_sampled"] == sum((r1 - r0) * 3000 * 128 for _, _, r0, r1 in blocks)
    assert len(blocks) > 2  # random blocks beyond the two fixed ones
    assert plan("b2h8s3000d64", seed=7, sample_macs=2.0 ** 27)["sample"]["blocks"] == a["blocks"]  # a seed names one sample
    assert plan("b2h8s3000d64", seed=8, sample_macs=2.0 ** 27)["sample"]["blocks"] != a["blocks"]
    # Causal: the last block's rows see every key, so the tiles are still all covered.
    c = plan("b1h4s3000d64:mask=causal_tl")["sample"]
    assert c["kv_tiles_covered"] == c["kv_tiles"]


def test_refusals_name_the_reason():
    # Quantized recipes are taken (their blocks emulated against the whole problem's quantization);
    # what the emulator cannot model on this problem is refused, naming it.
    r = plan("b1h2s256d64", recipe="sage_int8_fp8_perblock")
    assert "refusal" not in r and "sample" in r
    assert "on problem b1h2s256d64" in plan("b1h2s256d64", recipe="mxfp4_fp8_had")["refusal"]
    r = plan("b1h2s300t200d64:mask=causal_tl")
    assert "clips the key range" in r["refusal"]
    # A causal mask with seqlen_q != seqlen_kv needs the kernel's convention to express it.
    assert "convention is top_left" in plan("b1h2s100t300d64:mask=causal_br")["refusal"]
    assert "sample" in plan("b1h2s100t300d64:mask=causal_br", causal="bottom_right")
    assert "clips the key range" in plan("b1h2s300t200d64:mask=causal_br", causal="bottom_right")["refusal"]
    with pytest.raises(attest.AttestError, match="causal 'sideways' is not top_left or bottom_right"):
        plan("b1h2s256d64", causal="sideways")
    res = attest.device_case(exact, "recipe=mxfp4_fp8_had problem=b1h2s128d64", device="cpu")
    assert verdicts(res) == {"accuracy": "unsupported", "determinism": "unsupported", "call_path": "unsupported"}
    assert res.passed and all("on problem b1h2s128d64" in r["reason"] for r in res.rows)
    with pytest.raises(attest.AttestError, match="sample_rows 0 is not >= 1"):
        plan("b1h2s256d64", sample_rows=0)


def test_control_kernel_passes_sampled_and_complete():
    for fn, problem, macs, causal in ((exact, "b1h4s700d64", 2 ** 22, "top_left"),
                                      (exact, "b2h2s96d64", 2 ** 30, "top_left"),
                                      (exact, "b1h2s512d64:mask=causal_tl", 2 ** 22, "top_left"),
                                      (exact, "b1h4k2s300d64", 2 ** 22, "top_left"),  # GQA
                                      (exact_br, "b1h2s150t420d64:mask=causal_br", 2 ** 22, "bottom_right")):
        res = case(fn, problem, sample_macs=macs, causal=causal)
        assert res.passed, (problem, res.markdown())
        assert verdicts(res) == {"accuracy": "passed", "determinism": "passed", "call_path": "passed",
                                 "input_guard": "passed"}
        cov = res.stats["coverage"]
        assert cov["rows_compared_fp64"] == cov["rows_total"] and cov["fraction"] == 1.0


def test_wrong_causal_convention_is_caught_on_the_sample():
    """A top-left kernel declared bottom-right: its rows see too few keys."""
    res = case(exact, "b1h2s150t420d64:mask=causal_br", causal="bottom_right", checks=("accuracy",))
    assert verdicts(res) == {"accuracy": "failed", "input_guard": "passed"}, res.markdown()


def test_a_reused_output_buffer_is_not_judged_as_deterministic():
    buf = {}

    def writes_one_buffer(q, k, v, *, causal, scale):
        o = exact(q, k, v, causal=causal, scale=scale)
        if "o" not in buf:
            buf["o"] = torch.empty_like(o)
        buf["o"].copy_(o)
        return buf["o"]

    res = case(writes_one_buffer, "b1h2s128d64", checks=("determinism",))
    row = res.rows[0]
    assert row["verdict"] == "unsupported" and "shares memory with the first call's" in row["reason"]


def test_bitwise_contract_on_a_kernel_of_the_recipe():
    """attest's cpu.tiled.bf16 (bitwise to the bf16 emulator) passes bitwise on the sample; a planted
    bug of the same kernel family does not."""
    kw = dict(checks=("accuracy",), contract="bitwise", layout="bshd", dtype="float32")
    res = case(attest.cpp_kernel("cpu.tiled.bf16"), "b1h2s300d64", **kw)
    assert verdicts(res) == {"accuracy": "passed", "bitwise": "passed", "input_guard": "passed"}, res.markdown()
    res = case(attest.cpp_kernel("mutant.no_rescale"), "b1h2s300d64", **kw)
    assert verdicts(res)["bitwise"] == "failed", res.markdown()
    assert "differ bitwise from the recipe emulator; first at [" in res.rows[1]["reason"]


def test_complete_sample_gives_the_gates_accuracy_figures():
    """Same case id, same tensors, same rule: on a problem small enough to be judged completely the
    device path's accuracy figures equal the C++ gate's (CPU callback path)."""
    for problem in ("b1h2s130d64", "b1h4k2s100d64:mask=causal_tl"):
        res = case(exact, problem, sample_macs=2 ** 30, checks=("accuracy",))
        assert res.stats["sample"]["complete"]
        dev = res.rows[0]["figures"]["out"]
        rc, rows, _ = attest.run_case(exact, f"kernel=py.exact recipe=bf16 problem={problem} dist=normal seed=1 check=accuracy",
                                      reruns=1, dtype="bfloat16")
        gate = rows[0]["figures"]["out"]
        for part in ("measured", "budget", "floor"):
            assert dev[part]["max_abs"] == gate[part]["max_abs"], (problem, part)
            assert dev[part]["rel_l2"] == pytest.approx(gate[part]["rel_l2"], rel=1e-12), (problem, part)


def drops_last_key(q, k, v, *, causal, scale):
    return exact(q, k[:, :, :-1], v[:, :, :-1], causal=causal, scale=scale)


def nan_outside_the_sample(q, k, v, *, causal, scale):
    o = exact(q, k, v, causal=causal, scale=scale)
    o[0, 0, 500] = float("nan")  # head 0, query row 500: not in the sampled blocks of this case
    return o


def test_planted_accuracy_bug_fails_and_nan_outside_the_sample_is_caught():
    res = case(drops_last_key, "b1h2s1000d64")
    assert verdicts(res)["accuracy"] == "failed", res.markdown()
    res = case(nan_outside_the_sample, "b1h2s1000d64")
    sampled = [tuple(b) for b in res.stats["sample"]["blocks"]]
    assert not any(h == 0 and r0 <= 500 < r1 for _, h, r0, r1 in sampled)
    row = res.rows[0]
    assert row["verdict"] == "mistrusted" and "64 NaN/Inf elements (first at [0,500,0,0])" in row["reason"]
    # The complete pass locates it too: the block of head 0 holding row 500.
    assert row["figures"]["blocks"]["first_nonfinite_block"] == {"batch": 0, "head": 0, "rows": [448, 512]}


def test_rerun_and_call_path_differences_are_located():
    calls = itertools.count()

    def flips_second_call(q, k, v, *, causal, scale):
        o = exact(q, k, v, causal=causal, scale=scale)
        if next(calls) == 1:
            o[0, 1, 7, 3] += 0.25  # bhsd: head 1, row 7, channel 3
        return o

    def contiguity_dependent(q, k, v, *, causal, scale):
        o = exact(q, k, v, causal=causal, scale=scale)
        return o * 1.0078125 if q.is_contiguous() else o  # a different path for contiguous inputs

    res = case(flips_second_call, "b1h2s256d64", checks=("determinism",))
    r = res.rows[0]
    assert r["verdict"] == "failed" and "call 2: 1 of 32768 output elements differ" in r["reason"]
    assert "first at [0,7,1,3]" in r["reason"]
    res = case(contiguity_dependent, "b1h2s256d64", checks=("call_path",))
    assert res.rows[0]["verdict"] == "failed" and res.rows[0]["reason"].startswith("contig:")


def test_ladder_slope_verdict_over_device_lengths():
    def accumulates_in_bf16(q, k, v, *, causal, scale):
        # P.V summed in bfloat16 key by key: the error grows with the number of keys.
        p = torch.softmax((q.double() @ k.double().transpose(-1, -2)) * scale, -1).to(torch.bfloat16)
        acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=torch.bfloat16)
        for j in range(0, k.shape[2], 16):
            acc = (acc.double() + p[..., j:j + 16].double() @ v[:, :, j:j + 16].double()).to(torch.bfloat16)
        return acc

    kw = dict(lengths=(128, 256, 512, 1024), heads=1, head_dim=64, rows=32, blocks=2, device="cpu")
    good = attest.device_ladder(exact, **kw)
    assert good["verdict"] == "passed", good
    bad = attest.device_ladder(accumulates_in_bf16, **kw)
    assert bad["verdict"] == "failed", bad


# ---- complete accuracy (issue 32): every row against FP64, the sampled budget on every block ----

def zeroes_one_block(q, k, v, *, causal, scale):
    o = exact(q, k, v, causal=causal, scale=scale)
    o[0, 5, 320:384] = 0  # bhsd: head 5, rows 320-383
    return o


def scale_off_in_one_head(q, k, v, *, causal, scale):
    o = exact(q, k, v, causal=causal, scale=scale)
    o[:, 6:7] = exact(q[:, 6:7], k[:, 6:7], v[:, 6:7], causal=causal, scale=scale * 1.02)
    return o


def outside_sample(res, head, r0=None):
    return not any(h == head and (r0 is None or b0 == r0) for _, h, b0, _ in res.stats["sample"]["blocks"])


def test_every_block_is_judged_and_the_worst_is_named():
    problem = "b1h8s1024d64"
    res = case(zeroes_one_block, problem, checks=("accuracy",), sample_macs=2 ** 23)
    assert not res.stats["sample"]["complete"] and outside_sample(res, 5, 320), "the plant must lie outside the sample"
    row = res.rows[0]
    assert row["verdict"] == "failed", res.markdown()
    assert "1 of 128 blocks of 64 rows outside the block rule" in row["reason"]
    # Emulated itself, the block fails the gate's rule on its own rows: a confirmed failure.
    assert "confirmed by the block's own emulation: batch 0 head 5 rows 320-383" in row["reason"]
    blocks = row["figures"]["blocks"]
    assert blocks["worst"]["at"] == {"batch": 0, "head": 5, "rows": [320, 384]}
    assert blocks["worst"]["rel_l2"] == pytest.approx(1.0)  # a zero block is 100 % wrong
    cov = res.stats["coverage"]
    assert cov["rows_compared_fp64"] == cov["rows_total"] == 8 * 1024 and cov["rows_emulated"] < cov["rows_total"]

    res = case(scale_off_in_one_head, problem, checks=("accuracy",), sample_macs=2 ** 23)
    assert outside_sample(res, 6)
    row = res.rows[0]
    assert row["verdict"] == "failed" and "confirmed by the block's own emulation: batch 0 head 6 rows" in row["reason"], \
        res.markdown()
    assert row["figures"]["blocks"]["failed"] >= 8  # the head's blocks, not one unlucky block


def test_block_figures_match_an_independent_computation():
    """The engine's whole-output figures (sums of per-block error sums) against torch in float64."""
    problem = "b1h4s700d64"
    res = case(exact, problem, checks=("accuracy",))
    whole = res.rows[0]["figures"]["blocks"]["whole"]
    q, k, v = (torch.empty(1, 700, 4, 64) for _ in "qkv")
    N.call("device_generate", problem=problem, dist="normal", seed=1, q=D.view(q), k=D.view(k), v=D.view(v))
    qb, kb, vb = (x.permute(0, 2, 1, 3) for x in (q, k, v))
    ref = exact(qb.double(), kb.double(), vb.double(), causal=False, scale=64 ** -0.5).permute(0, 2, 1, 3)
    out = exact(*(x.to(torch.bfloat16) for x in (qb, kb, vb)), causal=False, scale=64 ** -0.5).permute(0, 2, 1, 3).double()
    d = out - ref
    assert whole["rel_l2"] == pytest.approx((d.norm() / ref.norm()).item(), rel=1e-9)
    assert whole["max_abs"] == pytest.approx(d.abs().max().item(), rel=1e-12)
    assert whole["elements"] == 700 * 4 * 64


def test_input_guard_fails_a_callable_that_writes_into_its_inputs():
    def halves_k_after(q, k, v, *, causal, scale):
        o = exact(q, k, v, causal=causal, scale=scale)
        k.mul_(0.5)  # a correct output, then its K damaged in place
        return o

    res = case(halves_k_after, "b1h2s256d64", checks=("accuracy",))
    row = [r for r in res.rows if r["check"] == "input_guard"][0]
    assert row["verdict"] == "failed" and "call 1: the callable wrote into its input k " in row["reason"], res.markdown()
    assert not res.passed
    # Declared: every call gets copies, nothing to guard, and the output is right.
    res = case(halves_k_after, "b1h2s256d64", mutates_inputs=True)
    assert res.passed and "input_guard" not in verdicts(res), res.markdown()
    assert "declared mutates_inputs" in res.markdown()


def test_the_gates_accuracy_rows_carry_the_engines_block_figures():
    """The C++ gate (callback path, `attest run`'s repro) reduces its output per 64-row block with
    the engine; the whole-output sum agrees with the metrics library's rel_l2 (an independent
    implementation) and the worst block is named."""
    rc, rows, _ = attest.run_case(zeroes_one_block, "kernel=py.zb recipe=bf16 problem=b1h8s1024d64 dist=normal seed=1 "
                                  "check=accuracy", reruns=1, dtype="bfloat16")
    fig = rows[0]["figures"]
    assert rows[0]["verdict"] == "failed"
    assert fig["blocks"]["whole"]["rel_l2"] == pytest.approx(fig["out"]["measured"]["rel_l2"], rel=1e-9)
    assert fig["blocks"]["worst"]["at"] == {"batch": 0, "head": 5, "rows": [320, 384]}
    assert fig["blocks"]["count"] == 8 * 16
