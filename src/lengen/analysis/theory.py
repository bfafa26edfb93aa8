"""Executable theory (Sec. 3-4, App. C-D), exact and small.

- `Ensemble`: a distribution ensemble with k-sparse planted correlations (Def. 3.2): background
  tokens i.i.d. from mu, a planted set S* ~ Q_pos(l), planted tokens Z ~ Q_voc, label g*(Z).
- `Fn`: a named, vectorised key function g0(S, x) (-inf allowed) or value function g1(x); a
  hypothesis class is a pair of lists (G_key, G_val), i.e. H_attn(G_key, G_val) of Def. 3.3.
- `predictions`: h_{g0,g1}(X) for every (g0, g1) at once, with footnote 6's rule (all scores -inf:
  the plain average of g1 over every k-set).
- `risk_table`: population risk E|h(X) - Y| at one length, exactly (enumerating S*, Z and, when mu
  is a point mass, the whole sequence), or by Monte Carlo with its standard error otherwise.
- `learn`: the learner of Eq. (3), argmin of the risk averaged over l ~ Unif([L/2, L]); it returns
  every minimiser, because the counterexamples of Prop. C.3 rely on a particular one.
- Assumption checks by code: locality and relativity (Assumption 3.3) on every k-set and token
  tuple up to a probe length, realizability (Assumption 4.1) at every checked length, and the
  smallest coverage constant eta_l of Assumption 4.2.
- `constructions`: the four Prop. C.3 counterexamples (k = 2, V = {1, 2}, L_local = 2), a Theorem
  4.3 positive case, and a position-coupling case (Prop. 4.4 / D.2).

Loss: |Y - Y'| on Y = [0, 1] (App. C.2). Positions are 1-based, as the paper's [l].
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lengen.core.settings import setting

NEG_INF = -np.inf
TIE_TOL = 1e-12  # risks closer than this are ties of the learner


@dataclass(frozen=True)
class Fn:
    """A named function; key functions take (S (..., k), x (..., k)), value functions x."""

    name: str
    fn: Callable = field(repr=False)

    def __call__(self, *args):
        return self.fn(*args)


@dataclass(frozen=True)
class Ensemble:
    """k-sparse planted correlations (Def. 3.2)."""

    name: str
    k: int
    vocab: tuple[int, ...]
    mu: dict[int, float]
    q_voc: dict[tuple[int, ...], float]
    q_pos: Callable[[int], dict[tuple[int, ...], float]] = field(repr=False)
    g_star: Callable[[tuple[int, ...]], float] = field(repr=False)


def sets_k(length: int, k: int) -> np.ndarray:
    """Every k-subset of [length] as sorted 1-based rows, shape (C(length, k), k)."""
    rows = list(itertools.combinations(range(1, length + 1), k))
    return np.array(rows, dtype=np.int64).reshape(len(rows), k)


def diameter(S: np.ndarray) -> np.ndarray:
    """max(S) - min(S) per row."""
    return S.max(axis=-1) - S.min(axis=-1)


# --- samples and predictions --------------------------------------------------------------------


@dataclass
class Samples:
    """Sequences X (C, l), labels Y (C,), weights w (C,) summing to 1; exact or Monte Carlo."""

    X: np.ndarray
    Y: np.ndarray
    w: np.ndarray
    exact: bool


def samples(ens: Ensemble, length: int, n_mc: int = 4000, seed: int = 0) -> Samples:
    """Exact enumeration of (S*, Z) when mu is a point mass, Monte Carlo draws otherwise."""
    q_pos = ens.q_pos(length)
    if len(ens.mu) == 1:
        (background,) = ens.mu
        rows, labels, weights = [], [], []
        for S, p_s in q_pos.items():
            for z, p_z in ens.q_voc.items():
                x = np.full(length, background, dtype=np.int64)
                x[np.array(S) - 1] = z
                rows.append(x)
                labels.append(ens.g_star(z))
                weights.append(p_s * p_z)
        return Samples(np.array(rows), np.array(labels, float), np.array(weights), exact=True)
    rng = np.random.default_rng([seed, length])
    sets, p_sets = list(q_pos), np.array(list(q_pos.values()))
    zs, p_zs = list(ens.q_voc), np.array(list(ens.q_voc.values()))
    tokens, p_tok = np.array(list(ens.mu)), np.array(list(ens.mu.values()))
    X = rng.choice(tokens, size=(n_mc, length), p=p_tok)
    Y = np.empty(n_mc)
    for r, (si, zi) in enumerate(
        zip(rng.choice(len(sets), n_mc, p=p_sets), rng.choice(len(zs), n_mc, p=p_zs), strict=True)
    ):
        X[r, np.array(sets[si]) - 1] = zs[zi]
        Y[r] = ens.g_star(zs[zi])
    return Samples(X, Y, np.full(n_mc, 1 / n_mc), exact=False)


def predictions(g_key: list[Fn], g_val: list[Fn], X: np.ndarray, k: int) -> np.ndarray:
    """h_{g0,g1}(X) of Def. 3.3 for every g0 in g_key, g1 in g_val: shape (n_key, n_val, C)."""
    S = sets_k(X.shape[1], k)
    xs = X[:, S - 1]  # (C, P, k) tokens of every k-set
    values = np.stack([np.asarray(g1(xs), float) for g1 in g_val], axis=-1)  # (C, P, n_val)
    weights = np.empty((X.shape[0], len(g_key), S.shape[0]))  # (C, n_key, P)
    for a, g0 in enumerate(g_key):
        # S as (1, P, k): key functions broadcast it against the tokens (C, P, k)
        scores = np.broadcast_to(np.asarray(g0(S[None], xs), float), xs.shape[:2])
        top = scores.max(axis=1, keepdims=True)
        dead = ~np.isfinite(top[:, 0])  # footnote 6: every score is -inf
        w = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
        w[dead] = 1.0  # the plain average over all k-sets
        weights[:, a] = w / w.sum(axis=1, keepdims=True)
    return np.matmul(weights, values).transpose(1, 2, 0)  # (n_key, n_val, C)


@dataclass
class Risk:
    """Population risk of every hypothesis at one length: (n_key, n_val), with standard error."""

    risk: np.ndarray
    stderr: np.ndarray
    exact: bool


def risk_table(
    g_key: list[Fn], g_val: list[Fn], ens: Ensemble, length: int, n_mc: int = 4000
) -> Risk:
    """E_{(X, Y) ~ P_l} |h(X) - Y| for every hypothesis of H_attn(g_key, g_val)."""
    s = samples(ens, length, n_mc)
    loss = np.abs(predictions(g_key, g_val, s.X, ens.k) - s.Y)  # (n_key, n_val, C)
    risk = loss @ s.w
    if s.exact:
        return Risk(risk, np.zeros_like(risk), exact=True)
    return Risk(risk, loss.std(axis=-1, ddof=1) / math.sqrt(len(s.w)), exact=False)


@dataclass
class Learned:
    """The learner of Eq. (3): averaged training risk of every hypothesis and all minimisers."""

    train_risk: np.ndarray  # (n_key, n_val)
    minimizers: list[tuple[int, int]]
    lengths: list[int]

    @property
    def min_risk(self) -> float:
        """Training risk of the minimisers."""
        return float(self.train_risk.min())


def training_lengths(L: int) -> list[int]:
    """The integers of [L/2, L] (Eq. (3), l ~ Unif([L/2, L]))."""
    return list(range(math.ceil(L / 2), L + 1))


def learn(g_key: list[Fn], g_val: list[Fn], ens: Ensemble, L: int) -> Learned:
    """argmin over H_attn of the risk averaged over l ~ Unif([L/2, L]); every minimiser kept."""
    lengths = training_lengths(L)
    avg = np.mean([risk_table(g_key, g_val, ens, n).risk for n in lengths], axis=0)
    best = avg.min()
    ties = np.argwhere(avg <= best + TIE_TOL)
    return Learned(avg, [(int(a), int(b)) for a, b in ties], lengths)


# --- assumption checks ---------------------------------------------------------------------------


def _all_inputs(k: int, vocab: tuple[int, ...], probe: int):
    """Every k-set of [probe] crossed with every token tuple: S (n, k), x (n, k)."""
    S = sets_k(probe, k)
    xs = np.array(list(itertools.product(vocab, repeat=k)), dtype=np.int64)
    return np.repeat(S, len(xs), axis=0), np.tile(xs, (len(S), 1))


def is_local(g_key: list[Fn], k: int, vocab: tuple[int, ...], l_local: int, probe: int) -> bool:
    """Assumption 3.3 item 1 on [probe]: g0(S, x) = -inf whenever diam(S) > l_local."""
    S, x = _all_inputs(k, vocab, probe)
    far = diameter(S) > l_local
    return all(np.all(np.asarray(g0(S[far], x[far])) == NEG_INF) for g0 in g_key)


def is_relative(g_key: list[Fn], k: int, vocab: tuple[int, ...], probe: int) -> bool:
    """Assumption 3.3 item 2 on [probe]: g0(S, x) = g0(S + i, x) for every shift i < probe."""
    S, x = _all_inputs(k, vocab, probe)
    for g0 in g_key:
        base = np.asarray(g0(S, x), float)
        for i in range(1, probe):
            if not np.array_equal(base, np.asarray(g0(S + i, x), float)):
                return False
    return True


def realizers(
    g_key: list[Fn], g_val: list[Fn], ens: Ensemble, lengths: list[int], delta: float = 0.0
) -> list[tuple[int, int]]:
    """Hypotheses with risk <= delta at every given length (Assumption 4.1 there)."""
    worst = np.max([risk_table(g_key, g_val, ens, n).risk for n in lengths], axis=0)
    return [(int(a), int(b)) for a, b in np.argwhere(worst <= delta + TIE_TOL)]


def _ratio(num: float, den: float) -> float:
    """num / den with 0/0 = 0 and x/0 = inf."""
    if num == 0:
        return 0.0
    return math.inf if den == 0 else num / den


def coverage_eta(ens: Ensemble, length: int, l_local: int) -> float:
    """Smallest eta_l satisfying both inequalities of Assumption 4.2 at l = length (inf: none)."""
    q = ens.q_pos(length)
    eta = 0.0
    for short in range(l_local, length + 1):
        q_short = ens.q_pos(short)
        for S, p in q.items():  # first inequality: Q_l(S) / Q_l'(S - delta)
            lo, hi = min(S), max(S)
            for shift in range(max(0, hi - short), lo):
                moved = tuple(i - shift for i in S)
                eta = max(eta, _ratio(p, q_short.get(moved, 0.0)))
        for S, p in q_short.items():  # second inequality: Q_l'(S) / Q_l(S)
            eta = max(eta, _ratio(p, q.get(S, 0.0)))
    return eta


@dataclass(frozen=True)
class TheoryConfig:
    """A tier's `theory` section: the training length and the test lengths of the exact risks
    (lengen.analysis.theory_cases.run); each field a config key (lengen.core.settings)."""

    L: int = setting(doc="maximum training length (L >= 4 L_local)", minimum=8, multipleOf=2)
    test_lengths: tuple[int, ...] = setting(
        doc="test lengths Lbar of the exact risks (Lbar >= 2L, Prop. C.3)",
        items={"minimum": 2},
        minItems=1,
        uniqueItems=True,
    )
