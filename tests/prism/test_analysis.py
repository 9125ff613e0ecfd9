"""Tests for prism.analysis: each metric on constructed inputs with known answers."""

import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.analysis import (
    LayerMetrics,
    attention_entropy,
    depth_curvature,
    format_profile,
    layer_profile,
    matrix_entropy,
    mean_attention_distance,
    token_curvature,
)

PI = math.pi
FAST = settings(max_examples=25, deadline=None)


# -----------------------------------------------------------------------------
# helpers


def uniform_causal(B, H, T):
    """Row i spreads its mass evenly over keys 0..i."""
    a = torch.ones(T, T).tril()
    a = a / a.sum(-1, keepdim=True)
    return a.expand(B, H, T, T).clone()


def diagonal(B, H, T):
    return torch.eye(T).expand(B, H, T, T).clone()


def sink(B, H, T):
    a = torch.zeros(T, T)
    a[:, 0] = 1.0
    return a.expand(B, H, T, T).clone()


def random_causal(B, H, T, seed, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    s = scale * torch.randn(B, H, T, T, generator=g)
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return s.softmax(-1)


def mean_i(f, T, start=0):
    return sum(f(i) for i in range(start, T)) / (T - start)


# -----------------------------------------------------------------------------
# mean attention distance


def test_mad_uniform():
    T = 7
    a = uniform_causal(2, 3, T)
    mad = mean_attention_distance(a)
    assert mad.shape == (3,)
    torch.testing.assert_close(mad, torch.full((3,), mean_i(lambda i: i / 2, T)))
    torch.testing.assert_close(mean_attention_distance(a, relative=True), torch.full((3,), 0.5))


def test_mad_uniform_drop_sink():
    # without key 0, row i is uniform over keys 1..i: mean distance (i - 1) / 2, for i >= 1
    T = 6
    a = uniform_causal(1, 2, T)
    got = mean_attention_distance(a, drop_sink=True)
    torch.testing.assert_close(got, torch.full((2,), mean_i(lambda i: (i - 1) / 2, T, start=1)))
    got_rel = mean_attention_distance(a, drop_sink=True, relative=True)
    torch.testing.assert_close(got_rel, torch.full((2,), mean_i(lambda i: (i - 1) / 2 / i, T, start=1)))


def test_mad_diagonal_is_zero():
    a = diagonal(2, 4, 9)
    for kw in [{}, {"relative": True}, {"drop_sink": True}, {"relative": True, "drop_sink": True}]:
        torch.testing.assert_close(mean_attention_distance(a, **kw), torch.zeros(4))


def test_mad_all_on_sink():
    T = 8
    a = sink(3, 2, T)
    torch.testing.assert_close(mean_attention_distance(a), torch.full((2,), mean_i(lambda i: i, T)))
    torch.testing.assert_close(mean_attention_distance(a, relative=True), torch.ones(2))
    # every row is excluded once the sink is dropped: no valid row -> NaN, as documented
    assert torch.isnan(mean_attention_distance(a, drop_sink=True)).all()


def test_mad_half_sink_half_diagonal():
    # row i >= 1: 0.5 on key 0, 0.5 on itself; row 0: 1.0 on itself
    T = 5
    a = 0.5 * sink(1, 1, T) + 0.5 * diagonal(1, 1, T)
    torch.testing.assert_close(mean_attention_distance(a), torch.tensor([mean_i(lambda i: i / 2, T)]))
    # dropping the sink leaves only the diagonal mass, renormalised: distance 0
    torch.testing.assert_close(mean_attention_distance(a, drop_sink=True), torch.zeros(1))


def test_mad_per_head_and_partial_sink_rows():
    # head 0 all on sink, head 1 diagonal; drop_sink: head 0 NaN, head 1 zero
    T = 4
    a = torch.cat([sink(2, 1, T), diagonal(2, 1, T)], dim=1)
    got = mean_attention_distance(a, drop_sink=True)
    assert torch.isnan(got[0]) and got[1] == 0
    # only some rows pure sink: those rows are excluded, not counted as zero
    b = uniform_causal(1, 1, T)
    b[0, 0, 2] = torch.tensor([1.0, 0, 0, 0])  # row 2 all on the sink
    expected = (0.0 + 1.0) / 2  # rows 1 (distance 0) and 3 (uniform over 1..3 -> 1)
    torch.testing.assert_close(mean_attention_distance(b, drop_sink=True), torch.tensor([expected]))


def test_mad_rejects_bad_shape():
    with pytest.raises(ValueError, match="expected attention of shape"):
        mean_attention_distance(torch.rand(2, 3, 4))


# -----------------------------------------------------------------------------
# attention entropy


def test_entropy_uniform_and_diagonal():
    T = 10
    torch.testing.assert_close(attention_entropy(uniform_causal(2, 3, T)), torch.full((3,), mean_i(lambda i: math.log(i + 1), T)))
    torch.testing.assert_close(attention_entropy(diagonal(2, 3, T)), torch.zeros(3))
    torch.testing.assert_close(attention_entropy(sink(2, 3, T)), torch.zeros(3))


@FAST
@given(seed=st.integers(0, 10_000), B=st.integers(1, 3), H=st.integers(1, 4), T=st.integers(2, 12))
def test_attention_metrics_invariant_to_batch_duplication(seed, B, H, T):
    a = random_causal(B, H, T, seed)
    a2 = torch.cat([a, a], dim=0)
    for f in [
        mean_attention_distance,
        lambda x: mean_attention_distance(x, relative=True),
        lambda x: mean_attention_distance(x, drop_sink=True),
        attention_entropy,
    ]:
        torch.testing.assert_close(f(a2), f(a), equal_nan=True)


@FAST
@given(seed=st.integers(0, 10_000), T=st.integers(2, 16))
def test_attention_metric_bounds(seed, T):
    a = random_causal(2, 3, T, seed)
    mad = mean_attention_distance(a)
    assert ((mad >= 0) & (mad <= mean_i(lambda i: i, T) + 1e-5)).all()
    rel = mean_attention_distance(a, relative=True)
    assert ((rel >= 0) & (rel <= 1 + 1e-6)).all()
    ns = mean_attention_distance(a, drop_sink=True)
    assert (ns[~ns.isnan()] >= 0).all()
    ent = attention_entropy(a)
    assert ((ent >= 0) & (ent <= mean_i(lambda i: math.log(i + 1), T) + 1e-5)).all()


# -----------------------------------------------------------------------------
# depth curvature


def test_depth_curvature_straight_line():
    v = torch.randn(2, 5, 8)
    hs = [l * v for l in range(6)]  # L = 5
    kappa = depth_curvature(hs)
    assert kappa.shape == (4,)
    torch.testing.assert_close(kappa, torch.zeros(4), atol=1e-5, rtol=0)


def test_depth_curvature_reversing():
    v = torch.randn(2, 5, 8)
    hs = [(l % 2) * v for l in range(5)]  # 0, v, 0, v, 0: every update reverses the previous
    torch.testing.assert_close(depth_curvature(hs), torch.full((3,), PI), atol=1e-5, rtol=0)


def test_depth_curvature_zigzag():
    e1, e2 = torch.eye(4)[0], torch.eye(4)[1]
    pts, x = [], torch.zeros(4)
    for l in range(7):
        pts.append(x.expand(3, 2, 4).clone())
        x = x + (e1 if l % 2 == 0 else e2)
    torch.testing.assert_close(depth_curvature(pts), torch.full((5,), PI / 2), atol=1e-5, rtol=0)
    torch.testing.assert_close(depth_curvature(torch.stack(pts)), torch.full((5,), PI / 2), atol=1e-5, rtol=0)


def test_depth_curvature_zero_update_is_finite():
    v = torch.randn(1, 3, 4)
    hs = [v, v, 2 * v]  # first update is zero: angle undefined -> pi/2 by convention, not NaN
    torch.testing.assert_close(depth_curvature(hs), torch.tensor([PI / 2]))


@FAST
@given(seed=st.integers(0, 10_000), scale=st.floats(0.1, 10.0))
def test_depth_curvature_invariant_to_scale_and_shift(seed, scale):
    g = torch.Generator().manual_seed(seed)
    hs = torch.randn(5, 2, 3, 6, generator=g)
    shift = torch.randn(6, generator=g)
    kappa = depth_curvature(hs)
    assert ((kappa >= 0) & (kappa <= PI)).all()
    torch.testing.assert_close(depth_curvature(scale * hs + shift), kappa, atol=1e-4, rtol=1e-4)


# -----------------------------------------------------------------------------
# token curvature


def test_token_curvature_known_paths():
    v = torch.randn(2, 1, 8)
    k = torch.arange(6.0)[None, :, None]
    torch.testing.assert_close(token_curvature(k * v), torch.tensor(0.0), atol=1e-5, rtol=0)
    torch.testing.assert_close(token_curvature((k % 2) * v), torch.tensor(PI), atol=1e-5, rtol=0)
    e = torch.eye(3)
    steps = torch.stack([e[0] if i % 2 == 0 else e[1] for i in range(6)])  # (6, 3)
    path = torch.cat([torch.zeros(1, 3), steps.cumsum(0)])[None]  # (1, 7, 3)
    torch.testing.assert_close(token_curvature(path), torch.tensor(PI / 2), atol=1e-5, rtol=0)


def test_token_curvature_short_sequence_is_nan():
    assert torch.isnan(token_curvature(torch.randn(2, 2, 4)))


# -----------------------------------------------------------------------------
# matrix entropy


def test_matrix_entropy_rank_one_is_zero():
    u = torch.randn(3, 1, 1) * torch.randn(1, 1, 16)  # every token a multiple of one vector
    z = torch.randn(3, 10, 1) * torch.randn(1, 1, 16)
    for h in [z, u.expand(3, 10, 16)]:
        for alpha in [0.5, 1.0, 2.0]:
            torch.testing.assert_close(matrix_entropy(h, alpha), torch.tensor(0.0), atol=1e-6, rtol=0)


def test_matrix_entropy_orthogonal_rows_is_one():
    T, D = 5, 12
    q, _ = torch.linalg.qr(torch.randn(D, T, dtype=torch.float64))  # orthonormal columns
    h = (3.0 * q.T).float()[None]  # (1, T, D), orthogonal rows of equal norm
    for alpha in [0.5, 1.0, 2.0]:
        torch.testing.assert_close(matrix_entropy(h, alpha), torch.tensor(1.0))


def test_matrix_entropy_tall_uses_feature_gram():
    # T > D: D equal-energy orthogonal directions -> 1; identical result either Gram side
    D = 4
    h = torch.eye(D).repeat(3, 1)[None]  # (1, 12, 4)
    torch.testing.assert_close(matrix_entropy(h), torch.tensor(1.0))


def test_matrix_entropy_two_equal_directions():
    # spectrum (1/2, 1/2, 0, ...): entropy log 2 / log min(T, D) for every alpha
    h = torch.zeros(1, 6, 8)
    h[0, :3, 0] = 1.0
    h[0, 3:, 1] = 1.0
    for alpha in [0.5, 1.0, 3.0]:
        torch.testing.assert_close(matrix_entropy(h, alpha), torch.tensor(math.log(2) / math.log(6)))


def test_matrix_entropy_rejects_bad_alpha():
    with pytest.raises(ValueError, match="alpha must be > 0"):
        matrix_entropy(torch.randn(1, 3, 3), alpha=0.0)


@FAST
@given(
    seed=st.integers(0, 10_000),
    B=st.integers(1, 3),
    T=st.integers(2, 12),
    D=st.integers(2, 12),
    alpha=st.sampled_from([0.5, 1.0, 2.0, 4.0]),
)
def test_matrix_entropy_in_unit_interval(seed, B, T, D, alpha):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, T, D, generator=g) * torch.rand(1, 1, D, generator=g)
    s = matrix_entropy(h, alpha)
    assert s.ndim == 0 and 0.0 <= float(s) <= 1.0 + 1e-6
    # duplicating the batch leaves the batch mean unchanged
    torch.testing.assert_close(matrix_entropy(torch.cat([h, h]), alpha), s)


# -----------------------------------------------------------------------------
# layer profile


def fake_trace(heads=(1, 2, 4, 4), B=2, T=6, D=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    L = len(heads)
    return SimpleNamespace(
        hidden_states=[torch.randn(B, T, D, generator=g) for _ in range(L + 1)],
        attentions=[random_causal(B, H, T, seed + l) for l, H in enumerate(heads)],
        logits=torch.randn(B, T, 11, generator=g),
    )


def test_layer_profile_rows():
    heads = (1, 2, 4, 4)
    tr = fake_trace(heads)
    rows = layer_profile(tr)
    assert len(rows) == len(heads)
    assert all(isinstance(r, LayerMetrics) for r in rows)
    assert [r.layer for r in rows] == [0, 1, 2, 3]
    assert [r.n_heads for r in rows] == list(heads)
    assert [r.depth for r in rows] == [0.25, 0.5, 0.75, 1.0]
    assert [len(r.mad_heads) for r in rows] == list(heads)
    for r in rows:
        for name in ["mad", "mad_relative", "mad_no_sink", "attn_entropy", "token_curvature", "matrix_entropy"]:
            assert math.isfinite(getattr(r, name)), name
    assert rows[-1].depth_curvature is None
    kappa = depth_curvature(tr.hidden_states)
    for r in rows[:-1]:
        assert r.depth_curvature == pytest.approx(float(kappa[r.layer]))
    # layer l uses attentions[l] and hidden_states[l + 1]
    r1 = rows[1]
    assert r1.mad == pytest.approx(float(mean_attention_distance(tr.attentions[1]).mean()))
    assert r1.matrix_entropy == pytest.approx(float(matrix_entropy(tr.hidden_states[2])))
    assert r1.token_curvature == pytest.approx(float(token_curvature(tr.hidden_states[2])))


def test_layer_profile_single_layer_and_mismatch():
    rows = layer_profile(fake_trace(heads=(3,)))
    assert len(rows) == 1 and rows[0].depth_curvature is None and rows[0].depth == 1.0
    bad = fake_trace(heads=(2, 2))
    bad.hidden_states = bad.hidden_states[:-1]
    with pytest.raises(ValueError, match="hidden states for 2 attention maps"):
        layer_profile(bad)


def test_format_profile():
    rows = layer_profile(fake_trace(heads=(1, 2, 4)))
    rows[0].mad_no_sink = float("nan")
    table, legend = format_profile(rows).split("\n\n")
    lines = table.splitlines()
    assert len(lines) == 1 + len(rows)
    assert lines[0].split()[0] == "layer" and "depth_curv" in lines[0]
    assert len({len(line) for line in lines}) == 1  # fixed width
    assert lines[-1].split()[-1] == "-"  # last layer has no depth curvature
    assert "nan" in lines[1]
    assert [line.split()[2] for line in lines[1:]] == ["1", "2", "4"]
    # the legend explains every column of the header, in order, one line each
    explained = legend.splitlines()
    assert [line.split()[0] for line in explained] == lines[0].split()
    meaning = {line.split()[0]: line.split(None, 1)[1] for line in explained}
    assert "[0, 1]" in meaning["mad_rel"] and "tokens" in meaning["mad"] and "nats" in meaning["attn_ent"]
    assert "radians" in meaning["tok_curv"] and "radians" in meaning["depth_curv"] and "[0, 1]" in meaning["mat_ent"]


def test_layer_profile_of_a_real_model_with_known_uniform_attention():
    """Zero q/k weights make every head of a real PrismLM attend uniformly: distance i/2 at row i, entropy log(i+1)."""
    from prism import ModelConfig, PrismLM, Schedule

    cfg = ModelConfig(
        n_layer=3, d_model=64, block_size=16, dh_min=16, dh_max=64, positions="rope", norm="rmsnorm", mlp="swiglu", qk_norm=False
    )
    torch.manual_seed(0)
    model = PrismLM(cfg, Schedule.parse("1x1,2x1,4x1")).eval()
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv.weight[: 2 * cfg.d_model] = 0  # q and k rows
            block.attn.qkv.bias[: 2 * cfg.d_model] = 0
        rows = layer_profile(model.trace(torch.randint(0, 256, (2, 16))))
    T = 16
    assert [r.n_heads for r in rows] == [1, 2, 4] and [len(r.mad_heads) for r in rows] == [1, 2, 4]
    for r in rows:
        assert r.mad_heads == pytest.approx([mean_i(lambda i: i / 2, T)] * r.n_heads, abs=1e-4)
        assert r.mad_relative == pytest.approx(0.5, abs=1e-5)
        assert r.attn_entropy == pytest.approx(mean_i(lambda i: math.log(i + 1), T), abs=1e-4)
        assert 0 <= r.token_curvature <= math.pi and 0 <= r.matrix_entropy <= 1
    assert rows[-1].depth_curvature is None and all(0 <= r.depth_curvature <= math.pi for r in rows[:-1])
