"""ci exercises every (check, variant) that smoke does, for kernels of the same capabilities
(issue 33: a torch flash kernel failed smoke by `layout`, a transposed K view on a two-head problem,
and passed ci, whose layout cases had one head or needed D != Dv). Read from the case files
themselves (docs/gate.md gives their format)."""
import re
from collections import namedtuple
from pathlib import Path

import pytest

import attest

CASES = Path(__file__).resolve().parents[2] / "datasets" / "cases"
PROBLEM = re.compile(r"b(\d+)h(\d+)(?:k(\d+))?s(\d+)(?:t(\d+))?d(\d+)(?:v(\d+))?")
Signature = namedtuple("Signature", "mask layout ragged gqa cross head_dim head_dim_v kv_heads_gt1 batch_gt1 "
                                    "partial_tile")


def signature(problem: str) -> Signature:
    """What decides which kernels run a problem and which variants a check takes on it, sizes
    aside: the capabilities it needs (mask, GQA, cross attention, head dims, ragged, layout) and
    the structure variants act on (several KV heads: transposed and head-slice views mean
    something; a batch > 1: batch strides, sample contamination; a partial 64-token tile)."""
    head, *opts = problem.split(":")
    m = PROBLEM.fullmatch(head)
    if not m:
        raise ValueError(f"problem '{problem}': not b<B>h<H>[k<Hkv>]s<S>[t<T>]d<D>[v<Dv>]")
    b, h, hkv, s, t, d, dv = (int(x) if x else None for x in m.groups())
    hkv, t, dv = hkv or h, t or s, dv or d
    o = dict(x.split("=", 1) for x in opts)
    return Signature(o.get("mask", "none"), o.get("layout", "bshd"), "cu_q" in o, hkv < h, s != t, d, dv, hkv > 1,
                     b > 1, s % 64 != 0 or t % 64 != 0)


def exercised(name: str, all_checks: list) -> set:
    """(check, dist, signature) for every case the file's templates expand to, the dist '*' kept
    as the wildcard it is. A template without check= runs every check; refusal joins every one."""
    out = set()
    for n, line in enumerate((CASES / f"{name}.cases").read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(f.split("=", 1) for f in line.split())
        try:
            sig = signature(fields["problem"])
        except (KeyError, ValueError) as e:
            raise AssertionError(f"{name}.cases line {n}: {e}") from e
        checks = set(fields["check"].split(",")) if "check" in fields else set(all_checks)
        for c in checks | {"refusal"}:
            for dist in fields.get("dist", "normal").split(","):
                out.add((c, dist, sig))
    return out


@pytest.fixture(scope="module")
def all_checks():
    return [c["name"] for c in attest.list_items("checks")]


def test_ci_exercises_every_check_and_variant_that_smoke_does(all_checks):
    smoke, ci = exercised("smoke", all_checks), exercised("ci", all_checks)
    assert len(smoke) > 100  # the parse found smoke's templates (8 lines, most with every check)
    missing = sorted((c, d, s) for c, d, s in smoke if (c, d, s) not in ci and (c, "*", s) not in ci)
    assert not missing, f"{len(missing)} (check, dist, problem signature) of smoke not in ci, first: {missing[:5]}"


def test_the_signature_tells_the_variants_apart():
    # The cases of issue 33: the layout case a two-head kernel failed on smoke and ci's one-head and
    # D != Dv layout cases (which such a kernel skips or cannot fail) are different variants.
    assert signature("b1h2s64d64") != signature("b1h1s1024d128:layout=bhsd")
    assert signature("b1h2s64d64") != signature("b1h4s200d96v64:layout=strided:pad=8")
    assert signature("b1h2s64d64") == signature("b1h4s128d64")  # sizes aside, the same variants
    sig = signature("b2h4k2s80t150d32:mask=causal_br")
    assert (sig.ragged, sig.gqa, sig.cross, sig.kv_heads_gt1, sig.batch_gt1) == (False, True, True, True, True)
    with pytest.raises(ValueError, match="b1h2x64d64"):
        signature("b1h2x64d64")
