"""PyTorch CPU SDPA (a kernel nobody here wrote) through attest.gate, and wrappers with planted bugs."""
import math

import pytest
import torch

import attest
from conftest import sdpa, sdpa_lse

OK = ("passed", "unsupported")


def by_check(res):
    out = {}
    for r in res.results:
        out.setdefault(r["check"], []).append(r["verdict"])
    return out


@pytest.mark.parametrize("recipe,dtype", [("f32", "float32"), ("bf16", None), ("fp16", None)])
def test_sdpa_accuracy_and_invariants(recipe, dtype):
    res = attest.gate(sdpa, recipe=recipe, dtype=dtype)
    checks = by_check(res)
    # Every group's accuracy verdict against FP64 within the noise floor, run-to-run, call paths
    # (contiguous copies, inside a batch of 2), layouts, poison, canary, churn, refusal.
    for c in ("accuracy", "determinism", "call_path", "layout", "poison", "canary", "churn", "refusal"):
        assert all(v in OK for v in checks[c]), (c, checks[c], res.summary)
    assert checks["accuracy"].count("passed") >= 11
    assert res.stats["calls"] > 50
    # What it does not pass is what torch really does (confirmed independently below).
    assert {r["check"] for r in res.failures} <= {"nonfinite", "subnormal"}, res.failures


def test_nan_in_masked_key_leaks_independent_confirmation():
    # attest's nonfinite check fails SDPA CPU: a NaN in a V row poisons rows that never see
    # that key (causal). Confirmed with torch alone: row 0 sees key 0 only.
    q = torch.randn(1, 1, 8, 16)
    k = torch.randn(1, 1, 8, 16)
    v = torch.randn(1, 1, 8, 16)
    v[0, 0, 5] = float("nan")
    out = sdpa(q, k, v, causal=True, scale=0.25)
    assert torch.isnan(out[0, 0, 0]).all()  # the leak (0 * NaN in P.V)
    res = attest.gate(sdpa, recipe="f32", dtype="float32", check="nonfinite")
    assert any("v NaN row" in r["reason"] for r in res.failures)


def test_bf16_subnormal_flush_independent_confirmation():
    # attest's subnormal check fails SDPA CPU bf16: V scaled by 2^-130 gives outputs in bf16's
    # subnormal range (2^-133..2^-126), which the CPU bf16 kernel flushes to zero.
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 64, 64, generator=g) for _ in range(3))
    v = v * 2.0 ** -130
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())
    out = sdpa(q.bfloat16(), k.bfloat16(), v.bfloat16(), causal=False, scale=1 / 8)
    assert ref.abs().max() > 2.0 ** -134
    assert (out == 0).all()
    res = attest.gate(sdpa, recipe="bf16", check="subnormal")
    assert any("flushed" in r["reason"] for r in res.failures)


def scale_off(q, k, v, *, causal, scale):
    return sdpa(q, k, v, causal=causal, scale=scale * 1.01)


def ignores_causal(q, k, v, *, causal, scale):
    return sdpa(q, k, v, causal=False, scale=scale)


_cache = {}


def stale(q, k, v, *, causal, scale):
    # Caches the output by shape: a second call on other data returns the first call's result.
    key = (tuple(q.shape), tuple(k.shape), causal)
    if key not in _cache:
        _cache[key] = sdpa(q, k, v, causal=causal, scale=scale)
    return _cache[key]


def swaps_heads(q, k, v, *, causal, scale):
    return sdpa(q, k.flip(1), v.flip(1), causal=causal, scale=scale)


@pytest.mark.parametrize("fn,caught", [(scale_off, {"accuracy"}), (ignores_causal, {"accuracy"}),
                                       (stale, {"accuracy", "nonfinite"}), (swaps_heads, {"accuracy"})])
def test_planted_wrapper_bugs_fail(fn, caught):
    _cache.clear()
    res = attest.gate(fn, recipe="f32", dtype="float32")
    assert not res.passed
    assert caught <= {r["check"] for r in res.failures if r["verdict"] == "failed"}, res.summary


def test_lse_kernel_split_kv_and_merge():
    res = attest.gate(sdpa_lse, recipe="f32", dtype="float32", lse=True, gqa=False, head_dim_v=False,
                      check="split_kv,accuracy")
    checks = by_check(res)
    assert checks["split_kv"].count("passed") >= 3 and all(v in OK for v in checks["split_kv"])
    rc, results = attest.merge(sdpa_lse, recipe="f32", dtype="float32", gqa=False, head_dim_v=False,
                               problem="b1h2s64t1000d64")
    assert rc == 0 and [r["verdict"] for r in results] == ["passed"] * 3
    assert [r["figures"]["shards"] for r in results] == [2, 4, 8]


def lse_log2(q, k, v, *, causal, scale):
    out, lse = sdpa_lse(q, k, v, causal=causal, scale=scale)
    return out, lse / math.log(2)


def test_merge_catches_lse_in_log2():
    rc, results = attest.merge(lse_log2, recipe="f32", dtype="float32", gqa=False, head_dim_v=False,
                               problem="b1h2s64t1000d64")
    assert rc == 1 and all(r["verdict"] == "failed" for r in results)
