"""Check `operands` through device_case(operands=...): a kernel's own quantized operands against
the recipe's quantizer (conformance/operands.hpp). The oracle of "correct" is a torch quantizer
written here after SageAttention 1.0.6's per_block_int8 (fp16 smoothing, per-block amax / 127,
+-0.5 then truncation); the plants are issue 34's Sage-internal plants applied to it, each
failed on the figure it moves. CPU tensors (device="cpu")."""
import pytest
import torch

import attest

# Sage 1.0.6's Triton recipe (as scripts/device/harness.py SAGE1).
SAGE1 = ("q=int8:per_block=128:round=half:prescale=sm_log2e;k=int8:per_block=64:round=half:smooth=fp32;"
         "v=fp16;p=fp16;tile_q=128;tile_kv=64;out=f32;pv_acc=fp16")
PROBLEM = "b1h2s200d64"  # 200 keys = 3 x 64 + 8: a partial last K block


def exact(q, k, v, *, causal, scale):
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal,
                                                            scale=scale).to(q.dtype)


def int8_blocks(x, rows, mult=None):
    """Per-block int8 of bhsd x (float32 math): scale = amax / 127 per `rows` tokens, codes
    x / scale +-0.5 truncated. -> codes (int8, x's shape), scales [B, H, blocks]."""
    x = x.float() if mult is None else x.float() * torch.tensor(mult, dtype=torch.float32)
    B, H, S, D = x.shape
    nb = (S + rows - 1) // rows
    pad = torch.zeros(B, H, nb * rows, D)
    pad[:, :, :S] = x
    blk = pad.view(B, H, nb, rows, D)
    scale = blk.abs().amax(dim=(3, 4)) / 127.0
    y = blk / scale[..., None, None]
    codes = (y + torch.where(y >= 0, 0.5, -0.5)).trunc().to(torch.int8).view(B, H, nb * rows, D)[:, :, :S]
    return codes.contiguous(), scale


def sage_operands(plant=None):
    def fn(q, k, v, *, causal, scale):
        km = k[:, :, :64].mean(dim=2, keepdim=True) if plant == "mean_one_block" else k.mean(dim=2, keepdim=True)
        qc, qs = int8_blocks(q, 128, mult=scale * 1.44269504)
        kc, ks = int8_blocks(k - km, 64)
        if plant == "last_scale_from_previous":
            ks[:, :, -1] = ks[:, :, -2]
        if plant == "one_code":
            qc[0, 1, 130, 5] += 2 if qc[0, 1, 130, 5] < 0 else -2
        return {"q": {"codes": qc, "scales": qs}, "k": {"codes": kc, "scales": ks, "mean": km}}
    return fn


def run(plant=None, dist="diffusion"):
    return attest.device_case(exact, f"recipe={SAGE1} problem={PROBLEM} dist={dist} seed=1", device="cpu",
                              checks=("accuracy",), dtype="float16", operands=sage_operands(plant))


def row(res):
    (r,) = [r for r in res.rows if r["check"] == "operands"]
    return r


def test_a_torch_sage_quantizer_passes():
    res = run()
    r = row(res)
    assert r["verdict"] == "passed", r["reason"]
    f = r["figures"]
    assert f["k"]["scales"]["groups"] == 2 * 4 and f["q"]["scales"]["groups"] == 2 * 2
    assert f["k"]["input_dtype"] == "f16" and f["k"]["mean"]["off"] == 0
    assert res.passed


@pytest.mark.parametrize("plant, says, role", [("mean_one_block", "smoothing means off", "k"),
                                                ("last_scale_from_previous", "scales off", "k"),
                                                ("one_code", "1 of 25600 codes off", "q")])
def test_sage_plants_fail_on_the_figure_they_move(plant, says, role):
    res = run(plant)
    r = row(res)
    assert r["verdict"] == "failed" and says in r["reason"] and r["reason"].startswith(f"{role}:"), r["reason"]
    assert not res.passed
    if plant == "last_scale_from_previous":
        assert r["figures"]["k"]["scales"]["worst"]["at"][2] == 3  # the last, partial block


def test_bad_operands_are_input_errors():
    def wrong_shape(q, k, v, *, causal, scale):
        c, s = int8_blocks(q, 64)  # 64-token blocks where the recipe says 128: 4 scales a head, not 2
        return {"q": {"codes": c, "scales": s}}
    with pytest.raises(attest.AttestError, match="q scales hold 8 values, the scheme .* has 4"):
        attest.device_case(exact, f"recipe={SAGE1} problem={PROBLEM} seed=1", device="cpu", checks=("accuracy",),
                           dtype="float16", operands=wrong_shape)
    with pytest.raises(attest.AttestError, match="expected a dict with keys among q, k, v"):
        attest.device_case(exact, f"recipe={SAGE1} problem={PROBLEM} seed=1", device="cpu", checks=("accuracy",),
                           dtype="float16", operands=lambda q, k, v, *, causal, scale: {"p": 1})


# FP8 per tensor as cuDNN's and Transformer Engine's callers do it (scripts/device/fp8.py quantize):
# codes = sat(x * fl(M / amax)) by torch's own float8 cast (the oracle of the element rounding),
# descale amax / M. The plant is issue 34's cuDNN p_e5m2: the graph's FP8 type E5M2.
def fp8_operands(dt=torch.float8_e4m3fn, plant=None):
    M = torch.finfo(dt).max

    def quant(x):
        x = x.float()
        amax = x.abs().amax()
        codes = (x * (M / amax)).clamp(-M, M).to(dt)
        return {"codes": codes.contiguous(), "scales": (amax / M).reshape(1)}

    def fn(q, k, v, *, causal, scale):
        got = {"q": quant(q), "k": quant(k), "v": quant(v)}
        if plant == "descale_twice":
            got["v"]["scales"] = got["v"]["scales"] ** 2
        return got
    return fn


@pytest.mark.parametrize("dt, plant, says", [(torch.float8_e4m3fn, None, None),
                                             (torch.float8_e5m2, None, "q: codes are fp8_e5m2 where the scheme "
                                                                       "'fp8_e4m3fn:per_tensor' makes fp8_e4m3fn"),
                                             (torch.float8_e4m3fn, "descale_twice", "v: 1 of 1 scales off")])
def test_fp8_per_tensor_operands(dt, plant, says):
    res = attest.device_case(exact, f"recipe=cudnn_fp8_e4m3 problem={PROBLEM} dist=diffusion seed=1", device="cpu",
                             checks=("accuracy",), dtype="bfloat16", operands=fp8_operands(dt, plant))
    r = row(res)
    if says is None:
        assert r["verdict"] == "passed", r["reason"]
        assert r["figures"]["v"]["codes"]["off"] == 0 and r["figures"]["v"]["codes"]["elements"] == 2 * 200 * 64
    else:
        assert r["verdict"] == "failed" and says in r["reason"], r["reason"]
        assert not res.passed
