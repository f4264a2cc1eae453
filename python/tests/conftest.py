import pytest
import torch
import torch.nn.functional as F

pytest_plugins = ["pytester"]


def sdpa(q, k, v, *, causal, scale):
    """PyTorch's CPU scaled_dot_product_attention: the third-party kernel under test."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)


def sdpa_lse(q, k, v, *, causal, scale):
    """The CPU flash kernel behind SDPA, which also returns the LSE (natural log, [B,H,S])."""
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)
    return out, lse


@pytest.fixture
def fns():
    return {"sdpa": sdpa, "sdpa_lse": sdpa_lse}
