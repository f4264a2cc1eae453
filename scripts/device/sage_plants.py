"""SageAttention 1.0.6's own pipeline with one planted defect each: issue 34's Sage-internal plants.

sageattn(q, k, v, tensor_layout="HND") at head_dim 64 or 128 (sageattention/core.py) is:
  km = k.mean(seq); k -= km                      smooth-K over the whole sequence, in k's dtype
  v -> fp16 (bf16 / float32 inputs)
  per_block_int8(q, k, sm_scale)                 Triton: Q blocks of 128 tokens (pre-scaled by
                                                 sm_scale * log2 e), K blocks of 64 (BLKK), scale =
                                                 amax / 127, codes x / scale +-0.5 truncated to int8
  attn_true / attn_false(q_int8, k_int8, v, q_scale, k_scale)   the Triton attention kernels
pipeline() is that body, calling the same functions through sageattention.core's names; a plant
changes exactly one step (the rest stays Sage's own Triton code):

  k_scales_per_tensor_not_per_block   one K scale for the whole smoothed K tensor (all batches and
      heads: amax / 127), written into every entry of k_scale's per-block layout, K codes requantized
      with it (int8_codes: the Triton quantizer's rounding). Q is untouched.
  smooth_k_mean_over_one_block        smooth-K subtracts the mean of the first 64-token K block (per
      batch, head and channel) instead of the mean over the whole sequence; Sage's own quantizer
      then runs on that K. Softmax is invariant to any per-channel shift of K, so this can only move
      the output through K's quantization (a larger residual offset widens the block scales).
  last_partial_kv_block_scale_from_previous_block   when kv_len % 64 != 0 (75600 = 1181 * 64 + 16),
      the attention kernel dequantizes the last, partial K block with the previous block's scale
      (an off-by-one in the tail's scale index): the codes stay Sage's own, the last k_scale entry
      is the previous one, so the tail keys' logits are scaled by prev / own. Refused (ValueError)
      when kv_len % 64 == 0: the defect does not exist.
"""
from __future__ import annotations

import torch

BLKK = 64  # per_block_int8's K block, the attention kernels' BLOCK_N
PLANTS = ("k_scales_per_tensor_not_per_block", "smooth_k_mean_over_one_block",
          "last_partial_kv_block_scale_from_previous_block")


def int8_codes(x, scale):
    """x / scale rounded as quant_per_block_int8_kernel rounds (fp32, +-0.5, truncation toward zero),
    saturated to [-127, 127]: with a scale from another range a code can exceed 127. torch divides
    exactly where the Triton kernel's fp32 `/` may be approximate: a code may differ by one at a
    rounding boundary, nothing the plants depend on."""
    y = x.float() / scale
    y = y + torch.where(y >= 0, 0.5, -0.5)
    return y.clamp(-127.0, 127.0).trunc().to(torch.int8)


def quantize(q, k, scale, plant=None, with_mean=False):
    """sageattn's smoothing and per_block_int8 on HND q, k, with `plant` (None: as sageattn) ->
    q_int8, q_scale, k_int8, k_scale, the arguments of the attention kernels (and km, the mean
    subtracted, with with_mean)."""
    from sageattention import core  # noqa: PLC0415
    if plant is not None and plant not in PLANTS:
        raise ValueError(f"unknown Sage plant '{plant}'")
    kv_len = k.shape[2]
    if plant == PLANTS[2] and (kv_len % BLKK == 0 or kv_len < BLKK):
        raise ValueError(f"kv_len {kv_len} has no partial last block after a full one: nothing to plant")
    if plant == PLANTS[1]:
        km = k[:, :, :BLKK].mean(dim=2, keepdim=True)  # the defect: the first K block's mean
    else:
        km = k.mean(dim=2, keepdim=True)
    k = k - km  # sageattn subtracts in place (k -= km): same values, the caller's k stays intact
    q_int8, q_scale, k_int8, k_scale = core.per_block_int8(q, k, sm_scale=scale, tensor_layout="HND")
    if plant == PLANTS[0]:
        s = k.float().abs().amax() / 127.0  # as the kernel's tl.max(tl.abs(x)) / 127., over the tensor
        k_int8, k_scale = int8_codes(k, s), k_scale.fill_(s)
    elif plant == PLANTS[2]:
        k_scale[:, :, -1:] = k_scale[:, :, -2:-1].clone()  # (b, h, 1, 1): the last full block's scale
    if with_mean:
        return q_int8, q_scale, k_int8, k_scale, km
    return q_int8, q_scale, k_int8, k_scale


def pipeline(q, k, v, *, causal=False, scale=None, plant=None):
    """sageattn(q, k, v, tensor_layout="HND", is_causal=causal, sm_scale=scale) at head_dim 64/128,
    with `plant` (one of PLANTS) or none."""
    from sageattention import core  # noqa: PLC0415
    if q.size(-1) not in (64, 128):
        raise ValueError(f"head_dim {q.size(-1)}: sageattn takes its hd96 kernels there, not reproduced here")
    dtype = q.dtype
    q_int8, q_scale, k_int8, k_scale = quantize(q, k, scale, plant)
    if dtype in (torch.bfloat16, torch.float32):
        v = v.to(torch.float16)
    attn = core.attn_true if causal else core.attn_false
    return attn(q_int8, k_int8, v, q_scale, k_scale, tensor_layout="HND", output_dtype=dtype)


def operands_fn(plant=None):
    """The operands the attention kernels get, for attest.device_case(operands=...) (check
    `operands`): fn(q, k, v, *, causal, scale) -> {"q": {codes, scales}, "k": {codes, scales, mean}}
    from quantize() with `plant` (None: sageattn's own). q_scale / k_scale are [B, H, blocks(, 1)]
    in block order, the layout of the recipe quantizer's scales."""
    if plant is not None and plant not in PLANTS:
        raise ValueError(f"unknown Sage plant '{plant}'")

    def fn(q, k, v, *, causal=False, scale=None):
        sc = q.size(-1) ** -0.5 if scale is None else scale
        qc, qs, kc, ks, km = quantize(q, k, sc, plant, with_mean=True)
        return {"q": {"codes": qc, "scales": qs}, "k": {"codes": kc, "scales": ks, "mean": km}}
    fn.__name__ = f"sage1_operands_{plant or 'unplanted'}"
    return fn


def plant_fn(plant):
    """The plant as a kernel callable fn(q, k, v, *, causal, scale) (bhsd, as lowp.sage_fn()'s);
    it does not write into its inputs."""
    if plant not in PLANTS:
        raise ValueError(f"unknown Sage plant '{plant}'")

    def fn(q, k, v, *, causal=False, scale=None):
        return pipeline(q, k, v, causal=causal, scale=scale, plant=plant)
    fn.__name__ = f"sage1_{plant}"
    return fn
