"""The draft budget: how many block slots K the target verifies in the next window, chosen per window.

`FixedChain(k)` always verifies K slots (the `--draft chain:K` / `--verify-len K` behaviour). `AutoBudget` chooses K
for the whole batch before every window, from candidates 1, 2, 4, 8, ... up to the drafter's block (K = 1: the
target verifies only the last token — one AR step — while the drafter still takes in the context, so drafting can
resume at the next window), to maximise expected accepted tokens per second:

    expected tokens of a step with K slots, per request r:  E_r(K) = 1 + sum_{i=1}^{K-1} prod_{j<=i} p_r(j)
    chosen K = argmax_K  sum_r E_r(K) / cost(n, K)         (ties: the smaller K)

p_r(j) is the probability that draft j is accepted given drafts 1..j-1 were: a per-request estimate shrunk toward the
drafter's curve measured so far over every request of the engine (`AcceptanceCounts`, kept by the engine across
schedulers), which is itself shrunk toward a prior (default: DEFAULT_PRIOR at every position). Every verified step
updates the counts: with a = τ - 1 accepted drafts out of K - 1, drafts 1..a count as accepted and draft a + 1 (if
it was verified) as rejected. cost(n, K) is seconds per step for a batch of n requests, from a table measured when the
scheduler starts (`SpecStep.time_step` on this device and dtype, or given) and refined online from the windows' own
times (an exponential average). Given the same cost table (`refine=False`) and the same observations the choice is
deterministic, and it only needs the window's host read (τ per step per request) — no extra device sync.

Exploration: while the drafter's curve has no observations the window runs the largest K (it measures every
position); a request whose estimate keeps K at 1 is probed the same way after `probe_every` windows at K = 1 in a row,
so a drafter that becomes useful again is noticed.

The output never depends on K (every K is lossless: spec output = AR output), only the speed does.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

DEFAULT_PRIOR = 0.7  # prior probability that a draft is accepted given the ones before it were
PRIOR_WEIGHT = 4.0  # pseudo-observations of the prior in the global estimate
REQUEST_WEIGHT = 4.0  # pseudo-observations of the global estimate in a request's estimate
REQUEST_DECAY = 0.8  # a request's counts fade by this per observed step: its estimate follows the text it is in
COST_SMOOTHING = 0.2  # weight of a new window's time in the online cost average


def powers_of_two_to(n: int) -> list[int]:
    """1, 2, 4, ... below n, and n itself: the K values auto chooses among (n = the drafter's block) and the batch
    buckets of CUDA graphs (n = max_batch_size)."""
    sizes, b = [], 1
    while b < n:
        sizes.append(b)
        b *= 2
    return sizes + [n]


def candidates(block_size: int) -> list[int]:
    """K values auto chooses among: 1, 2, 4, ... and the drafter's block itself."""
    return powers_of_two_to(block_size)


@dataclass
class CostTable:
    """Seconds per step, by batch size n and verified slots K, measured at a few batch sizes: linear interpolation
    between them (beyond the largest: proportional to n). Refined online (`observe`)."""

    seconds: dict[tuple[int, int], float]  # (n, K) -> seconds per step
    refine: bool = True

    def __post_init__(self):
        for (n, k), s in self.seconds.items():
            if not (isinstance(n, int) and n >= 1 and isinstance(k, int) and k >= 1 and s > 0):
                raise ValueError(f"cost table entry ({n}, {k}) -> {s}: needs n >= 1, K >= 1, seconds > 0")

    @classmethod
    def measured(cls, seconds: dict[tuple[int, int], float], refine: bool = True) -> "CostTable":
        """A table from timings, made monotone (a step never costs less with more slots or more rows: a timing
        that says so is noise), so noise cannot make a larger K look free."""
        table = dict(seconds)
        for n in sorted({n for n, _ in table}):
            running = 0.0
            for k in sorted(k for nn, k in table if nn == n):
                running = table[(n, k)] = max(table[(n, k)], running)
        for k in sorted({k for _, k in table}):
            running = 0.0
            for n in sorted(n for n, kk in table if kk == k):
                running = table[(n, k)] = max(table[(n, k)], running)
        return cls(table, refine)

    def sizes(self, k: int) -> list[int]:
        return sorted(n for n, kk in self.seconds if kk == k)

    def cost(self, n: int, k: int) -> float:
        sizes = self.sizes(k)
        if not sizes:
            raise KeyError(f"no cost measured for K = {k}")
        if (n, k) in self.seconds:
            return self.seconds[(n, k)]
        lower = [s for s in sizes if s < n]
        upper = [s for s in sizes if s > n]
        if not lower:
            return self.seconds[(upper[0], k)]
        if not upper:
            top = lower[-1]
            return self.seconds[(top, k)] * n / top
        a, b = lower[-1], upper[0]
        t = (n - a) / (b - a)
        return (1 - t) * self.seconds[(a, k)] + t * self.seconds[(b, k)]

    def observe(self, n: int, k: int, seconds_per_step: float) -> None:
        if not self.refine or seconds_per_step <= 0:
            return
        key = (n, k)
        old = self.seconds.get(key)
        self.seconds[key] = seconds_per_step if old is None else (1 - COST_SMOOTHING) * old + COST_SMOOTHING * seconds_per_step


@dataclass
class AcceptanceCounts:
    """Per draft position j (0-based): steps that verified draft j + 1 after accepting drafts 1..j, and how many of
    them accepted it."""

    accepted: list[float]
    trials: list[float]

    @classmethod
    def empty(cls, positions: int) -> "AcceptanceCounts":
        return cls([0.0] * positions, [0.0] * positions)

    def add(self, k: int, tau: int, decay: float = 1.0) -> None:
        """One step that verified K slots (K - 1 drafts) and accepted τ - 1 of them; the counts so far are
        multiplied by `decay` first."""
        if decay != 1.0:
            self.accepted = [x * decay for x in self.accepted]
            self.trials = [x * decay for x in self.trials]
        a = tau - 1
        for j in range(min(a + 1, k - 1)):  # drafts 1..a accepted, draft a + 1 rejected (if verified)
            self.trials[j] += 1
            if j < a:
                self.accepted[j] += 1


class FixedChain:
    """Always K verified slots."""

    tree = False  # budgets whose k counts the nodes of a draft tree say so

    def __init__(self, k: int):
        self.k = k

    def choose(self, requests: Sequence[Hashable]) -> int:
        return self.k

    def observe(self, request_id: Hashable, k: int, taus: Sequence[int]) -> None:
        pass

    def observe_time(self, n: int, k: int, seconds_per_step: float) -> None:
        pass

    def forget(self, request_id: Hashable) -> None:
        pass

    def describe(self) -> str:
        return f"chain:{self.k}"


class FixedTree(FixedChain):
    """Always a draft tree of N nodes (`--draft tree:N`, spec/tree.py)."""

    tree = True

    def describe(self) -> str:
        return f"tree:{self.k}"


@dataclass
class AutoBudget:
    """Chooses K per window (see the module docstring)."""

    tree = False

    block_size: int
    cost: CostTable
    prior: Sequence[float] | None = None  # per draft position 1..B-1; default DEFAULT_PRIOR everywhere
    probe_every: int = 4
    curve: AcceptanceCounts | None = None  # the drafter's counts over every request (shared; default: a new one)
    _requests: dict = field(init=False, default_factory=dict)
    _at_one: dict = field(init=False, default_factory=dict)  # request -> windows in a row at K = 1

    def __post_init__(self):
        self.ks = candidates(self.block_size)
        positions = self.block_size - 1
        prior = list(self.prior) if self.prior is not None else [DEFAULT_PRIOR] * positions
        if len(prior) < positions or not all(0 < p < 1 for p in prior[:positions]):
            raise ValueError(f"prior needs {positions} probabilities in (0, 1), got {prior!r}")
        self._prior = prior[:positions]
        if self.curve is None:
            self.curve = AcceptanceCounts.empty(positions)
        if len(self.curve.trials) != positions:
            raise ValueError(f"the acceptance counts have {len(self.curve.trials)} positions, the block {positions}")
        missing = [k for k in self.ks if not self.cost.sizes(k)]
        if missing:
            raise ValueError(f"the cost table has no entry for K = {missing}")

    # ---- estimates -------------------------------------------------------------------------------------------------

    def acceptance(self, request_id: Hashable | None = None) -> list[float]:
        """p(j) for draft positions 1..B-1: the global estimate, or a request's."""
        g = [(PRIOR_WEIGHT * p + s) / (PRIOR_WEIGHT + n)
             for p, s, n in zip(self._prior, self.curve.accepted, self.curve.trials)]
        counts = self._requests.get(request_id) if request_id is not None else None
        if counts is None:
            return g
        return [(REQUEST_WEIGHT * p + s) / (REQUEST_WEIGHT + n) for p, s, n in zip(g, counts.accepted, counts.trials)]

    @staticmethod
    def expected_tokens(p: Sequence[float], k: int) -> float:
        """E[τ] of a step that verifies K slots: 1 + sum over i < K of the chance drafts 1..i are all accepted."""
        total, run = 1.0, 1.0
        for j in range(k - 1):
            run *= p[j]
            total += run
        return total

    # ---- the choice ------------------------------------------------------------------------------------------------

    def choose(self, requests: Sequence[Hashable]) -> int:
        n = len(requests)
        curves = [self.acceptance(r) for r in requests]
        best_k, best_rate = self.ks[0], -1.0
        for k in self.ks:
            rate = sum(self.expected_tokens(p, k) for p in curves) / self.cost.cost(n, k)
            if rate > best_rate * (1 + 1e-9):
                best_k, best_rate = k, rate
        if not any(self.curve.trials):  # nothing measured yet: the largest K measures every position
            return self.ks[-1]
        if best_k == 1:
            runs = [self._at_one.get(r, 0) + 1 for r in requests]
            for r, c in zip(requests, runs):
                self._at_one[r] = c
            if max(runs) >= self.probe_every:  # probe: one drafting window that measures every position
                for r in requests:
                    self._at_one[r] = 0
                return self.ks[-1]
        else:
            for r in requests:
                self._at_one[r] = 0
        return best_k

    def observe(self, request_id: Hashable, k: int, taus: Sequence[int]) -> None:
        if k < 2:
            return
        counts = self._requests.get(request_id)
        if counts is None:
            counts = self._requests[request_id] = AcceptanceCounts.empty(self.block_size - 1)
        for tau in taus:
            counts.add(k, tau, REQUEST_DECAY)
            self.curve.add(k, tau)

    def observe_time(self, n: int, k: int, seconds_per_step: float) -> None:
        self.cost.observe(n, k, seconds_per_step)

    def forget(self, request_id: Hashable) -> None:
        self._requests.pop(request_id, None)
        self._at_one.pop(request_id, None)

    def describe(self) -> str:
        return "auto"
