"""
Layer geometry and attention metrics for a trained causal LM.

Why this exists: the Prism claim is that a head schedule (few wide heads early,
more narrow heads later) changes *how* layers attend (local vs global) and how
the residual stream moves through depth. To check that, and perhaps to predict
a schedule from geometry, we need precise, reproducible per-layer measurements.
The definitions, written out here so that each function below can be checked
against them (token curvature after Hosseini & Fedorenko 2023, matrix entropy
after Skean et al. 2025, "Layer by Layer"):

  attention (per head, from softmax probabilities A of shape (B, H, T, T)):
    mean attention distance  MAD   = mean_i sum_j A_ij (i - j)
    relative distance        MAD_r = mean_{i>=1} sum_j A_ij (i - j) / i
    attention entropy        H     = mean_i -sum_j A_ij log A_ij
  hidden states (h_l = hidden_states[l]: h_0 = embedding output, h_{l+1} =
  residual stream after block l, blocks numbered 0..L-1):
    depth curvature  kappa_l = angle(h_{l+1} - h_l, h_{l+2} - h_{l+1}), l = 0..L-2
    token curvature  C       = mean_k angle(x_{k+1} - x_k, x_{k+2} - x_{k+1})
    matrix entropy   S_alpha of the trace-normalised Gram spectrum, / log min(T, D)

Everything here is pure torch on whatever device the inputs live on, has no
side effects, and never needs gradients. `layer_profile` only relies on an
object with `.hidden_states` (L+1 tensors (B, T, D)) and `.attentions`
(L tensors (B, H_l, T, T)), i.e. the model's `Trace`, or any stand-in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

# -----------------------------------------------------------------------------
# attention metrics


def _check_attn(attn: torch.Tensor) -> None:
    if attn.ndim != 4 or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"expected attention of shape (B, H, T, T), got {tuple(attn.shape)}")


def mean_attention_distance(
    attn: torch.Tensor,
    *,
    relative: bool = False,
    drop_sink: bool = False,
    eps: float = 1e-6,
) -> torch.Tensor:
    """
    Mean attention distance per head: how far back, in tokens, a head looks.

    attn: (B, H, T, T) softmax probabilities of a causal model; row i (query) may
    only put mass on keys j <= i. Entries above the diagonal are ignored.
    Returns (H,) float32, one value per head, averaged over the batch and over
    the query positions i that are valid for the chosen variant:

    - default: d_i = sum_j A_ij (i - j), averaged over all i = 0..T-1.
      Raw distance grows with position (row i can look back at most i tokens),
      so it depends on T; it is what ViT-style "attention distance" plots show.
    - relative=True: d_i / i, averaged over i >= 1 only (row 0 has nowhere to
      look). This is in [0, 1]: 0 = only the token itself, 1 = only token 0.
      Uniform causal attention gives 1/2 at every i.
    - drop_sink=True: many heads park spare mass on token 0 (the "attention
      sink"), which inflates raw distance without carrying information. We drop
      key 0, renormalise the remaining mass of the row to 1, and use
      d_i = sum_{j>=1} A_ij (i - j) / sum_{j>=1} A_ij. Rows i = 0, and rows whose
      non-sink mass is <= eps (all mass on the sink), are excluded from the mean.
      Combined with relative=True the renormalised distance is divided by i.

    A head with no valid row at all (e.g. drop_sink on a pure sink head) gets NaN.
    """
    _check_attn(attn)
    B, H, T, _ = attn.shape
    a = attn.float().tril()  # (B, H, T, T), zero above the diagonal
    pos = torch.arange(T, device=attn.device, dtype=a.dtype)
    dist = (pos[:, None] - pos[None, :]).clamp(min=0)  # (T, T): i - j for j <= i
    valid = torch.ones(T, dtype=torch.bool, device=attn.device).expand(B, H, T)  # (B, H, T)

    if drop_sink:
        a, dist = a[..., 1:], dist[:, 1:]  # (B, H, T, T-1), (T, T-1): keys 1..T-1
        mass = a.sum(-1)  # (B, H, T) non-sink mass of each row
        d = (a * dist).sum(-1) / mass.clamp(min=eps)  # (B, H, T)
        valid = valid & (mass > eps) & (pos >= 1)
    else:
        d = (a * dist).sum(-1)  # (B, H, T)

    if relative:
        d = d / pos.clamp(min=1)
        valid = valid & (pos >= 1)

    d = torch.where(valid, d, torch.zeros_like(d))
    return d.sum(dim=(0, 2)) / valid.sum(dim=(0, 2))  # (H,), 0/0 -> NaN


def attention_entropy(attn: torch.Tensor) -> torch.Tensor:
    """
    Attention entropy per head, in nats: mean over batch and query positions i of
    -sum_j A_ij log A_ij (with 0 log 0 = 0).

    Low entropy = sharp, few-key heads; high = diffuse heads. The maximum at row
    i is log(i + 1) (uniform over the i + 1 visible keys), so, like raw distance,
    it grows with T. attn: (B, H, T, T) probabilities. Returns (H,) float32.
    """
    _check_attn(attn)
    ent = torch.special.entr(attn.float().clamp(min=0)).sum(-1)  # (B, H, T)
    return ent.mean(dim=(0, 2))  # (H,)


# -----------------------------------------------------------------------------
# trajectory curvature


def _angle(u: torch.Tensor, v: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """
    Angle in [0, pi] between vectors u and v along the last dim, (..., D) -> (...).

    Mathematically arccos(clamp(cos(u, v), -1, 1)), but computed as
    2 * atan2(|u^ - v^|, |u^ + v^|) with u^ = u / |u| (Kahan), which stays accurate
    near 0 and pi where arccos loses about half the float32 digits (a perfectly
    straight line would otherwise read as ~1e-3 rad). If either vector has norm
    <= eps the angle is undefined; we return pi/2, i.e. what arccos(0) gives with
    an eps-guarded denominator, so degenerate steps never produce NaN.
    """
    u, v = u.float(), v.float()
    nu = u.norm(dim=-1, keepdim=True)  # (..., 1)
    nv = v.norm(dim=-1, keepdim=True)
    uh, vh = u / nu.clamp(min=eps), v / nv.clamp(min=eps)
    ang = 2 * torch.atan2((uh - vh).norm(dim=-1), (uh + vh).norm(dim=-1))  # (...)
    degenerate = (nu <= eps).squeeze(-1) | (nv <= eps).squeeze(-1)
    return torch.where(degenerate, torch.full_like(ang, math.pi / 2), ang)


def depth_curvature(hidden_states: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
    """
    Curvature of each token's trajectory through depth, in radians.

    hidden_states: L+1 tensors (B, T, D) (embedding output, then the residual
    stream after each of the L blocks), or one stacked tensor (L+1, B, T, D).
    With u_l = h_{l+1} - h_l (the update written by block l), returns (L-1,)
    where entry l = kappa_l = angle(u_l, u_{l+1}), l = 0..L-2, averaged over all
    tokens (batch and positions). kappa_l is the turn the trajectory makes at the
    vertex h_{l+1}, the output of block l: 0 = block l+1 keeps pushing in the same
    direction, pi/2 = orthogonal update, pi = it undoes block l. Empty if L < 2.
    """
    h = hidden_states if isinstance(hidden_states, torch.Tensor) else torch.stack(list(hidden_states))
    if h.ndim != 4:
        raise ValueError(f"expected hidden states of shape (L+1, B, T, D), got {tuple(h.shape)}")
    u = h[1:] - h[:-1]  # (L, B, T, D) per-block updates
    kappa = _angle(u[:-1], u[1:])  # (L-1, B, T)
    return kappa.mean(dim=(1, 2))  # (L-1,)


def token_curvature(h: torch.Tensor) -> torch.Tensor:
    """
    Curvature of the sequence trajectory within one layer (Hosseini & Fedorenko
    2023), in radians: trained LMs tend to "straighten" it with depth.

    h: (B, T, D) token representations of one layer. With v_k = x_{k+1} - x_k,
    c_k = angle(v_k, v_{k+1}), k = 0..T-3; returns the scalar mean over k and the
    batch. Needs T >= 3; returns NaN otherwise.
    """
    if h.ndim != 3:
        raise ValueError(f"expected (B, T, D), got {tuple(h.shape)}")
    if h.shape[1] < 3:
        return torch.tensor(float("nan"), device=h.device)
    v = h[:, 1:] - h[:, :-1]  # (B, T-1, D)
    c = _angle(v[:, :-1], v[:, 1:])  # (B, T-2)
    return c.mean()


# -----------------------------------------------------------------------------
# matrix-based entropy


def matrix_entropy(h: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """
    Normalised matrix-based (prompt) entropy (Skean et al. 2025): how many
    directions the tokens of one sequence spread over. 0 = all token vectors are
    collinear (rank 1), 1 = they span min(T, D) directions with equal energy.

    h: (B, T, D). Per sequence Z = h[b] (T x D, not centred), Gram K = Z Z^T
    (T x T), or Z^T Z (D x D) when T > D, which has the same non-zero spectrum
    and is smaller. Eigenvalues are computed in float64 (eigvalsh), negatives and
    round-off-level values (<= n * float64 eps * largest) set to 0, and the rest
    divided by their sum (= trace) to give a distribution lambda. Then
        S_alpha = log(sum lambda^alpha) / (1 - alpha),   alpha -> 1: -sum lambda log lambda,
    divided by log(min(T, D)) so that it lies in [0, 1], and averaged over the batch.
    alpha must be > 0. If min(T, D) == 1 the entropy is 0; an all-zero Z gives NaN.
    Returns a float32 scalar.
    """
    if h.ndim != 3:
        raise ValueError(f"expected (B, T, D), got {tuple(h.shape)}")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    _B, T, D = h.shape
    z = h.double()
    K = z.mT @ z if T > D else z @ z.mT  # (B, n, n), n = min(T, D)
    n = K.shape[-1]
    lam = torch.linalg.eigvalsh(K)  # (B, n) ascending
    tol = n * torch.finfo(lam.dtype).eps * lam[:, -1:].clamp(min=0)  # (B, 1)
    lam = torch.where(lam > tol, lam, torch.zeros_like(lam))
    lam = lam / lam.sum(-1, keepdim=True)  # (B, n), sums to 1 (NaN if Z == 0)
    if abs(alpha - 1.0) < 1e-12:
        s = torch.special.entr(lam).sum(-1)  # (B,)
    else:
        s = torch.log((lam**alpha).sum(-1)) / (1.0 - alpha)  # (B,); 0**alpha = 0 for alpha > 0
    if n == 1:
        return torch.zeros((), device=h.device)
    return (s / math.log(n)).mean().float()


# -----------------------------------------------------------------------------
# per-layer profile of a model trace


@dataclass
class LayerMetrics:
    """
    One row of a layer profile. Attention metrics are averaged over the layer's
    heads (unweighted; per-head raw MAD kept in `mad_heads`). Geometry metrics
    use the layer's output, hidden_states[layer + 1].
    depth_curvature is kappa_layer, the turn at this layer's output between the
    update of this block and the next one; None for the last layer, whose output
    ends the trajectory.
    """

    layer: int  # 0-based block index
    depth: float  # relative depth (layer + 1) / L, in (0, 1]
    n_heads: int
    mad: float  # mean attention distance, tokens
    mad_relative: float  # MAD / query position, in [0, 1]
    mad_no_sink: float  # MAD with mass on token 0 removed and renormalised, tokens
    attn_entropy: float  # nats
    token_curvature: float  # radians
    matrix_entropy: float  # normalised, in [0, 1]
    depth_curvature: float | None  # radians; None where undefined (last layer)
    mad_heads: list[float] = field(default_factory=list)  # per-head raw MAD, tokens


def _nanmean(x: torch.Tensor) -> float:
    return float(x.nanmean()) if x.numel() else float("nan")


@torch.no_grad()
def layer_profile(trace: Any, *, alpha: float = 1.0) -> list[LayerMetrics]:
    """
    Compute every metric for each of the L layers of a trace.

    trace: anything with .hidden_states (L+1 tensors (B, T, D): embedding output,
    then the residual stream after each block) and .attentions (L tensors
    (B, H_l, T, T), causal softmax probabilities); head counts may differ per
    layer. Layer l uses attentions[l] and hidden_states[l + 1] (its output).
    Depth curvature: kappa_l (l = 0..L-2) goes to layer l, the last layer gets
    None. Layer-level attention values average the per-head values; for
    mad_no_sink, heads with no non-sink mass at all (NaN) are skipped.
    alpha is passed to matrix_entropy.
    """
    hs, atts = list(trace.hidden_states), list(trace.attentions)
    L = len(atts)
    if len(hs) != L + 1:
        raise ValueError(f"expected L+1 = {L + 1} hidden states for {L} attention maps, got {len(hs)}")
    kappa = depth_curvature(hs).tolist() if L >= 2 else []  # (L-1,)

    rows = []
    for l in range(L):
        attn, out = atts[l], hs[l + 1]  # (B, H_l, T, T), (B, T, D)
        mad = mean_attention_distance(attn)  # (H_l,)
        rows.append(
            LayerMetrics(
                layer=l,
                depth=(l + 1) / L,
                n_heads=attn.shape[1],
                mad=_nanmean(mad),
                mad_relative=_nanmean(mean_attention_distance(attn, relative=True)),
                mad_no_sink=_nanmean(mean_attention_distance(attn, drop_sink=True)),
                attn_entropy=_nanmean(attention_entropy(attn)),
                token_curvature=float(token_curvature(out)),
                matrix_entropy=float(matrix_entropy(out, alpha=alpha)),
                depth_curvature=kappa[l] if l < L - 1 else None,
                mad_heads=mad.tolist(),
            )
        )
    return rows


_COLUMNS = [  # (header, attribute, format, legend: what it measures, range and units)
    ("layer", "layer", "{:d}", "block index, 0-based"),
    ("depth", "depth", "{:.3f}", "relative depth (layer + 1) / L, in (0, 1]"),
    ("heads", "n_heads", "{:d}", "attention heads in the layer (schedule)"),
    ("mad", "mad", "{:.2f}", "mean attention distance: how far back the heads look, in tokens (mean over heads)"),
    (
        "mad_rel",
        "mad_relative",
        "{:.3f}",
        "mad / query position, in [0, 1]: 0 = the token itself, 0.5 = uniform over the past, 1 = only the first token",
    ),
    ("mad_nosink", "mad_no_sink", "{:.2f}", "mad with the mass on token 0 (the attention sink) removed, in tokens"),
    (
        "attn_ent",
        "attn_entropy",
        "{:.3f}",
        "attention entropy, nats: low = sharp few-key heads, high = diffuse (at most log(position + 1))",
    ),
    (
        "tok_curv",
        "token_curvature",
        "{:.3f}",
        "token curvature: mean turn of the token-to-token trajectory of the layer's output, radians in [0, pi]",
    ),
    (
        "mat_ent",
        "matrix_entropy",
        "{:.3f}",
        "matrix entropy of the layer's output, in [0, 1]: 0 = all tokens on one direction, 1 = spread evenly over min(T, D)",
    ),
    (
        "depth_curv",
        "depth_curvature",
        "{:.3f}",
        "depth curvature: turn between this block's update and the next one's, radians in [0, pi] (pi/2 = orthogonal);"
        " '-' on the last layer",
    ),
]


def format_profile(rows: Sequence[LayerMetrics]) -> str:
    """
    Plain fixed-width text table, one line per layer after a header, for a CLI;
    then a blank line and a legend, one line per column: what it measures, its range and units.
    Undefined values (None) print as '-', NaN as 'nan'. Angles in radians,
    entropies in nats (matrix entropy normalised), distances in tokens.
    """

    def cell(fmt: str, v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float) and math.isnan(v):
            return "nan"
        return fmt.format(v)

    table = [[h for h, _, _, _ in _COLUMNS]]
    table += [[cell(fmt, getattr(r, attr)) for _, attr, fmt, _ in _COLUMNS] for r in rows]
    widths = [max(len(line[c]) for line in table) for c in range(len(_COLUMNS))]
    text = "\n".join("  ".join(s.rjust(w) for s, w in zip(line, widths)) for line in table)
    width = max(len(h) for h, _, _, _ in _COLUMNS)
    return text + "\n\n" + "\n".join(f"{h.ljust(width)}  {meaning}" for h, _, _, meaning in _COLUMNS)
