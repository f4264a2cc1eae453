"""The sequence-length ladder: error per length and its log-log slope against the emulator's."""
import torch

import attest
from conftest import sdpa

LENGTHS = [256, 512, 1024, 2048, 4096]


def bf16_running_sum(q, k, v, *, causal, scale):
    # Online softmax over 64-key blocks in float32, but the output accumulator stored in bf16
    # after every block: one rounding per block, so the error grows with the number of KV blocks
    # (a random walk: slope ~0.5), while the bf16 recipe's own error does not.
    q, k, v = q.float(), k.float(), v.float()
    b, h, s, d = q.shape
    acc = torch.zeros(b, h, s, v.shape[-1], dtype=torch.bfloat16)
    m = torch.full((b, h, s, 1), -float("inf"))
    l = torch.zeros(b, h, s, 1)
    for j in range(0, k.shape[2], 64):
        sc = (q @ k[:, :, j:j + 64].transpose(-1, -2)) * scale
        mn = torch.maximum(m, sc.amax(-1, keepdim=True))
        p = torch.exp(sc - mn)
        alpha = torch.exp(m - mn)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = (acc.float() * alpha + p @ v[:, :, j:j + 64]).bfloat16()
        m = mn
    return (acc.float() / l).bfloat16()


def test_sdpa_ladder_flat():
    rep = attest.ladder(sdpa, recipe="bf16", lengths=LENGTHS, heads=1, head_dim=64)
    assert rep["verdict"] == "passed", attest.format_ladder(rep)
    assert [e["length"] for e in rep["table"]] == LENGTHS
    assert all(e["rows_sampled"] == min(4 * 128, e["length"]) for e in rep["table"])
    assert abs(rep["slope"]["kernel"]) < 0.15


def test_bf16_accumulator_fails_on_slope():
    rep = attest.ladder(bf16_running_sum, recipe="bf16", lengths=LENGTHS, heads=1, head_dim=64,
                        gqa=False, cross=False, head_dim_v=False)
    assert rep["verdict"] == "failed", attest.format_ladder(rep)
    assert rep["slope"]["kernel"] > rep["slope"]["threshold"]
    assert "slope" in rep["reason"]
