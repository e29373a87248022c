"""The draft budget: what the target verifies in the next window — a chain of K block slots or a draft tree of N
nodes (`Draft`) — chosen per window.

`Fixed(draft)` always runs the same draft (`--draft chain:K` / `--verify-len K`, `--draft tree:N`). `AutoBudget`
chooses for the whole batch before every window, among chains of K = 1, 2, 4, 8, ... up to the drafter's block (K = 1:
the target verifies only the last token — one AR step — while the drafter still takes in the context, so drafting can
resume at the next window) and, where the target verifies trees, trees of a few sizes (`trees`), to maximise expected
accepted tokens per second:

    expected tokens of a step, per request r:  E_r(d) = 1 + sum_{i=1}^{D_r(d)-1} prod_{j<=i} p_r,d(j)
    chosen d = argmax_d  sum_r E_r(d) / cost(n, d)         (ties: the cheaper, listed first: chains by K, then trees)

D_r(d) is the longest τ the draft allows (K for a chain; a tree's depth + 1), capped by the tokens request r has left
(its max_new_tokens minus what it emitted: a step cannot emit more; without the cap, the windows chosen at the end of a
batch, where requests have a few tokens left, emitted 71 % of the tokens predicted, measured at batch 16). p_r,d(j) is
the probability that depth j is accepted given depths 1..j-1 were. For chains: a per-request estimate shrunk toward the
drafter's curve measured so far over every request of the engine (`AcceptanceCounts`, kept by the engine across
schedulers), itself shrunk toward a prior (default: DEFAULT_PRIOR at every position). Every verified step updates the
counts: with a = τ - 1 accepted, depths 1..a count as accepted and depth a + 1 (if the draft reached it) as rejected;
a request's own counts fade by REQUEST_DECAY per step, its AR steps too (`_fade`), so its estimate follows its text. A
tree step counts twice: as a tree step, and as the step its argmax chain (the chain a chain draft verifies, as deep as
the step verified it: where it lies in the tree, and one depth past it where the accepted path follows it to there;
spec/tree.chain_equivalent) would have been, so the chain estimate keeps learning while trees run. For a tree of N
nodes, 1 - p_r,tree(j) = (1 - p_r,chain(j)) x miss_N(j): a tree catches some of its argmax chain's misses (a sibling
of the chain's node holds the target's token), so its miss factor is the ratio of the tree's rejection rate to its
argmax chain's, counted on the same tree steps at the depths the step verified the chain at (`TreeCounts`), the
chain's counts shrunk toward the chain's global estimate and the tree's toward the next smaller tree size's curve
(trees nest) — a paired comparison, so it does not depend on which text trees happened to be chosen for. Applied
to a request's chain estimate, the factor scales what the tree can still add, most where the chain misses most: a
ratio of acceptances instead (a lift, p_tree = p_chain x lift) promised a request whose chain accepts 90 % a tree
accepting 99 % at every depth. Replayed on eagle_gsm8k traces with
trees priced as on a GPU (tree:16 / tree:32 at 1.02 / 1.06x chain:16), auto / the best fixed draft at batch 1 went
from 0.95 to 1.01 with it (level on this CPU's costs, where trees hardly pay). The estimates are then calibrated
(`Calibration`, one per engine): each draft's expected drafted tokens (E - 1 per request) are scaled by what the
windows it was chosen for accepted against what was expected of them then (the chains' windows together, the trees'
together, their pseudo-tokens at the chains' factor), fading with its own windows and with every window of any draft
(`Calibration.age`): the curve keeps every step since the engine started, so chains were expected ~6 % low
(batch 1 on this CPU), and near ties went to the tree (trees were expected ~5 % high as well, until a tree step's
argmax chain counted one depth past the tree).
cost(n, d) is seconds per step for a batch of n requests whose longest cache holds L positions, from a table measured
when the first auto scheduler starts (`SpecStep.measure_costs` on this device and dtype at two cache lengths, every draft
timed in each round so machine drift shifts all alike; or given) and refined online from the windows' own times: a
window's time first moves a drift factor common to every draft (the machine's speed now), and only the rest moves the
draft's entry: slowly for the batch size's most observed draft (the drift follows its windows), as a mean of its windows
against that one's for a rarer draft (`CostTable.observe`); a window right after one of another draft teaches that
draft's switch factor instead, and a change of draft is priced with it, spread over SWITCH_HORIZON windows; and where
windows of drafts of different cost run at one batch size, a line through their times against their entries gives that
batch size a per-window overhead every draft's price carries (`CostTable.overhead`: through a server on a 2-core CPU a
window costs its step plus ~1 ms of the server's work, which one ratio priced as if it scaled with the step); one table
per engine, so each run starts from what the runs before it measured. Given the same cost table (`refine=False`) and
the same observations the choice is deterministic, and it only needs the window's host read (τ per step per request) — no
extra device sync. The estimates are numpy arrays over every request at once; a scheduler hands a window's observations
over (`observe_window`) and has them taken in (`prepare`, every REFRESH_STEPS steps) while the device runs the next
window, so on a GPU the choice only looks rows up (its estimates then lag a window, or a few one-step windows).
A batch's pricing (every draft's expected tokens and cost) serves up to PRICE_WINDOWS windows while the batch, the
estimates, the draft chosen last and its cache length (to LENGTH_STEP positions) stand (`_priced`). A batch held at AR
on merit is held for those windows (`hold`), and so is a batch drafting on merit while its pricing would be served
again (no take-in due, no tree measurement near, its caps and its cache length's bucket standing): where the host runs
the windows, the scheduler runs them with no call to the budget and hands their times, observations and forgets over
after them, in order (`held` counts them as choose() would have): the same choices, at a few us per window instead of
~60-90.

Exploration: every draft is priced optimistically where the drafter's curve is thin (`optimism`: each request's drafted
tokens scaled by what they would be at a curve with a few more steps, each accepted at every depth; the factor fades as
steps are counted, ~1.01 for chain:8 after 300 steps), so an estimate made from a few steps is tried rather than
trusted: a long-lived scheduler held at AR at higher load learns its curve from a few probe steps only, and without it
held AR at one request on that curve's word (`_optimism`); a tree size's own counts likewise (`tree_optimism`), so a
tree whose few measured steps came out unlucky is tried again rather than left behind a cheaper chain for good. The
calibration pairs each window with the curve's own expectation. While the drafter's curve has no observations a window
that would draft at the prior runs the largest chain (it measures every position; a batch held at AR at the prior waits
for a probe or a smaller batch); a batch whose estimates keep K at 1 is probed with one window of the best drafting
choice after `probe_every` windows at K = 1 in a row, then after twice as many, and so on up to MAX_PROBE_BACKOFF times,
so a drafter that becomes useful again is noticed (a window that drafts on merit refreshes the estimates as a probe
does: it restarts the count, not the backoff). The backoff belongs to the batch, not to its requests: with per-request
backoffs every new arrival (interval 4 again) made the whole batch probe, and a server at concurrency 16 where AR is
best ran 0.83x AR (replayed with continuous arrivals: 0.83x -> 0.97-0.99x). A tree size with fewer than
TREE_MEASURE_STEPS observed steps runs (for one request, near the best drafting choice: BURST_CHANCE) up to TREE_BURST
windows in a row from one window in every `tree_probe_every` (its windows after the first follow one of their own draft:
they teach its cost entry, which a window after another draft does not, and its measurement costs fewer switches), on a
clock the engine keeps across its schedulers (`TreeClock`, as it keeps the curves): a client calling generate() per
prompt makes a scheduler per prompt, 5-6 windows each at batch 1, and a clock per scheduler never reached a measurement
window (on an H200, where trees cost what chains do, tree:32 was never measured nor chosen: auto 0.82-0.87x tree:32 at
batch 1). Exploration is also priced: a probe or a tree measurement runs only once the time waited for it (the predicted
cost of the windows since the last one) times `explore_share` covers its regret (a measurement's burst: its first
window's; the rest's are a debt the next tree measurement waits for as well) — what the window is expected to lose
against the best choice: its cost minus the time the best choice takes for the tokens it is expected to emit (a probe's
cost: its table entry times what probes have cost against their entries so far, CostTable.probe_factor, one per engine:
the first drafting window after an AR stretch takes in the context rows the stretch left pending, and runs a cold
drafter); a probe's regret counts over its chance of finding drafting ahead (`_chance`: 1 at a priced tie, 0.83 at 0.9x
AR's rate, 0.58 at 0.76x, 0.17 at 0.5x; EXPLORE_SPREAD), so a probe is worth what it may find: one far behind AR waits
that much longer, one near a tie (batch 8 on this CPU, where the probes decide between chain:8 and AR) about as before
(not a tree measurement: an unmeasured tree's price is a floor, not an estimate). Where drafting is cheap a probe costs
little and comes at the backoff's pace; in a big batch on a slow verify it waits: measured in-process at batch 16 on
this CPU (fixture pair, 64 tokens), three chain:4 probes cost 52 ms of a 302 ms decode, ~9 % of it lost against AR.
Probes and tree measurements spend one credit: either kind of window restarts the time the other waits for (in an AR
stretch a tree measurement refreshes the requests' estimates as a probe does). With a credit each, a probe came the
window after a tree measurement, and at 8 requests on this CPU exploration took ~3-4 % of the time, against the 2 % it
is allowed (2026-11-27).

What AR costs a drafting engine: an AR window (K = 1) does not run the drafter: it appends the step's tap features to
the slot's pending context rows, which the drafter takes in at its next draft (spec/step.py, DEFERRED_CONTEXT); a slot
whose rows are full keeps the newest half and the drafter's context then starts there (an AR stretch never runs the
drafter). Requests that join a batch auto would hold at AR at the drafter's curve (`defers_context`) leave their
prompt out of the drafter but for its last rows, pending likewise. So a batch held at AR costs about a plain AR
engine's steps and prefills; at the price of a drafter that, if drafting resumes, sees a window of recent context
instead of all of it (on the fixture pair: τ within 1 % with the last 64 positions; 4 % lower with 32). A batch held
at AR more than TAP_LEAD steps from its next probe (the window where both the backoff's interval and explore_share allow
it) does not tap at all (`needs_context`): its windows are plain AR steps, and the drafter's context restarts where AR
windows feed it again. Not where the drafter's curve would draft for one request fewer (a batch of one: for it): there
the AR is the requests' own estimates, which soon draft again, with the drafter's context whole.

The output never depends on the draft (every draft is lossless: spec output = AR output), only the speed does.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from dflash_trt.spec.tree import max_depth

DEFAULT_PRIOR = 0.7  # prior probability that a draft is accepted given the ones before it were
PRIOR_WEIGHT = 4.0  # pseudo-observations of the prior in the global estimate
REQUEST_WEIGHT = 4.0  # pseudo-observations of the global estimate in a request's estimate
REQUEST_DECAY = 0.8  # a request's counts fade by this per step (drafted or AR): its estimate follows the text it is in
FADE_STEPS = 4  # AR steps a request's counts fade by at once (_fade)
FADED = 0.05  # a request's counts whose first position has fewer (decayed) trials are cleared: its estimate is global
DRIFT_RATE = 0.1  # weight of a window's log-time residual in the machine's drift (every draft's cost alike)
COST_SMOOTHING = 0.01  # weight of what the drift leaves of that residual in the draft's own cost entry ...
ENTRY_PRIOR = 4.0  # ... at least 1 / (this + its windows) for an entry other than its batch size's most observed one
ANCHOR_RATE = 0.5  # weight of a window of that most observed draft in its windows' speed (CostTable.observe) ...
ANCHOR_FRESH = 16  # ... and the windows at its batch size since its last one within which that speed is a reference
OVERHEAD_GATE = 0.1  # ... and not where the batch size's overhead is this share of the anchor's entry or more
OVERHEAD_RATE = 0.02  # per window, the fade of the window times the per-window overhead is fitted to (CostTable.observe)
OVERHEAD_PRIOR = 1.0  # pseudo-windows of a zero overhead in that fit
MAX_OVERHEAD = 2.0  # the overhead stays within this many times the batch size's cheapest entry
OVERHEAD_SPREAD = 0.05  # the fit needs its windows' entries to vary: variance over squared mean at least this
REFRESH_STEPS = 16  # observed steps kept before prepare() takes them in (where the host waits for it: on CPU)
TREE_PRIOR_WEIGHT = 8.0  # pseudo-observations of the chain's estimate in a tree's (and its paired chain's) estimate
MAX_ACCEPTANCE = 0.99  # a tree's estimated acceptance (from its miss factor) stays below 1
MAX_PROBE_FACTOR = 8.0  # probe_factor stays within [1/8, 8]
MAX_PROBE_BACKOFF = 64  # a batch held at K = 1 is probed after probe_every windows, then 2x, 4x, ... up to 64x
EXPLORE_SHARE = 0.02  # exploration (probes and tree measurements together) may lose at most this share of the time
EXPLORE_SPREAD = 0.5  # how far (log) a batch's drafting rate may lie from its price: a probe's chance (_chance)
SWITCH_HORIZON = 8  # windows a switch of draft's extra cost is spread over (AutoBudget.choose)
TREE_MEASURE_STEPS = 16  # observed steps of a tree size before auto stops probing it
TREE_BURST = 4  # windows in a row a tree size's measurement runs at most (_choose) ...
BURST_CHANCE = 0.5  # ... where its chance of being ahead of the best choice (_chance) is at least this
AUTO_TREES = (16, 32)  # tree sizes auto considers where the target verifies trees
PRICE_WINDOWS = 8  # windows a batch's pricing serves while its inputs stand (AutoBudget._priced)
LENGTH_STEP = 16  # cache positions within which a batch's pricing stands (AutoBudget._priced)
TAP_LEAD = 32  # steps before a held batch's next probe from which its AR windows feed the drafter's context again
CALIBRATION_PRIOR = 64.0  # pseudo-tokens of a calibration factor (drafted tokens accepted / expected) at 1
CALIBRATION_DECAY = 0.99  # calibration sums fade by this per window of theirs ...
CALIBRATION_AGING = 0.99  # ... and by this per window of any draft, AR's too (Calibration.age): ~50 windows' memory
CALIBRATION_AGE = 16  # windows after which that fade is applied (each application prices anew)
MAX_CALIBRATION = 2.0  # a calibration factor stays within [1/2, 2]
OPTIMISM = 2.0  # pseudo-steps accepting at every position in the optimistic curve a draft is priced at (_optimism)
TREE_OPTIMISM = 0.5  # ... and in each tree size's own counts (its miss factor: _optimism)


class Draft(NamedTuple):
    """What one step verifies: ("chain", K) the last token and K - 1 argmax drafts (K = 1: an AR step), or
    ("tree", N) a draft tree of N nodes (spec/tree.py)."""

    kind: str
    size: int

    @property
    def tree(self) -> bool:
        return self.kind == "tree"

    def max_tau(self, block_size: int) -> int:
        """The longest τ a step of this draft can have."""
        return max_depth(self.size, block_size) + 1 if self.tree else self.size

    def __str__(self) -> str:
        return f"{self.kind}:{self.size}"


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
    """Seconds per step, by batch size n, draft (a `Draft`) and the batch's cache length, measured at a few batch sizes
    and lengths: linear interpolation between them (beyond the largest n: proportional to n; beyond the measured
    lengths: the nearest segment's slope, and below the shortest no less than half its entry). Keys (n, draft) make a
    table that does not depend on the length. Refined online (`observe`).

    Why the length: attention reads every cached position, and a longer chain or tree reads them for more query rows,
    so the ratios that decide change with the context. Timed at one length (256) while the workload's caches held
    26-286 positions (eagle_gsm8k, 128 new tokens), the CPU table put AR at batch 8 at 0.27x chain:8's step, where
    those windows took 0.23x: auto drafted at batch 8 for 0.95x AR; timed at 128 it held AR, 1.03x AR (2026-11-26)."""

    seconds: dict[tuple, float]  # (n, draft, cache length) or (n, draft) -> seconds per step, at the table's speed
    refine: bool = True
    drift: float = 1.0  # the machine's speed now relative to the table's (window time / table entry), learnt online
    probe_factor: float = 1.0  # what probes' windows cost over their entries (geometric mean): see AutoBudget.choose
    # per draft: what its windows cost over their entries right after a window of another draft (see observe)
    switch: dict[Draft, float] = field(default_factory=dict)
    # per batch size: seconds per step every window costs beyond its entry, at the table's speed (see observe)
    overhead: dict[int, float] = field(default_factory=dict)
    # n -> decayed [windows, Σx, Σy, Σx², Σxy] of the overhead's fit (observe)
    _fits: dict = field(init=False, default_factory=dict, repr=False)
    # (n, draft) -> its windows observed (not switched, not probes); n -> every draft's; n -> (the draft with the most
    # of them, their number, what its windows' log-times left over the drift, faded by ANCHOR_RATE, n's windows then)
    _seen: dict = field(init=False, default_factory=dict, repr=False)
    _windows: dict = field(init=False, default_factory=dict, repr=False)
    _anchor: dict = field(init=False, default_factory=dict, repr=False)
    _keys_of: dict = field(init=False, default_factory=dict, repr=False)  # (n, draft) -> its keys (_keys)

    def __post_init__(self):
        arity = {len(key) if isinstance(key, tuple) else 0 for key in self.seconds}
        if not arity <= {2, 3} or len(arity) > 1:
            raise ValueError("cost table keys must all be (n, draft) or all (n, draft, cache length)")
        for key, s in self.seconds.items():
            n, d, length = key if len(key) == 3 else key + (1,)
            if not (isinstance(n, int) and n >= 1 and isinstance(d, Draft) and d.size >= 1 and isinstance(length, int)
                    and length >= 1 and s > 0):
                raise ValueError(f"cost table entry {key!r} -> {s}: needs n >= 1, a Draft, a cache length >= 1, "
                                 "seconds > 0")
        self.lengths: list[int | None] = sorted({key[2] for key in self.seconds}) if arity == {3} else [None]
        self._sizes: dict[Draft, list[int]] = {}  # per draft, the batch sizes measured (cost() runs per window)
        for n, d in sorted({key[:2] for key in self.seconds}):
            missing = [length for length in self.lengths if self._key(n, d, length) not in self.seconds]
            if missing:
                raise ValueError(f"cost table: ({n}, {d}) has no entry at cache length {missing[0]} (every batch size "
                                 "and draft needs one at each length the table has)")
            self._sizes.setdefault(d, []).append(n)

    def _key(self, n: int, d: Draft, length: int | None) -> tuple:
        return (n, d) if length is None else (n, d, length)

    @classmethod
    def measured(cls, seconds: dict[tuple, float], refine: bool = True) -> "CostTable":
        """A table from timings, made monotone (a step never costs less with a longer chain, a bigger tree, more rows
        or a longer cache: a timing that says so is noise), so noise cannot make a larger draft look free."""
        table = dict(seconds)

        def ascending(keys):
            running = 0.0
            for key in sorted(keys):
                running = table[key] = max(table[key], running)

        rest = lambda key: key[2:]  # noqa: E731  (the length, where the table has one)
        for n, kind, r in {(key[0], key[1].kind, rest(key)) for key in table}:  # chains by K, trees by N
            ascending([key for key in table if key[0] == n and key[1].kind == kind and rest(key) == r])
        for d, r in {(key[1], rest(key)) for key in table}:  # by rows
            ascending([key for key in table if key[1] == d and rest(key) == r])
        for n, d in {key[:2] for key in table}:  # by length
            ascending([key for key in table if key[:2] == (n, d)])
        return cls(table, refine)

    def sizes(self, d: Draft) -> list[int]:
        return self._sizes.get(d, [])

    def cost(self, n: int, k: Draft, length: int | None = None) -> float:
        """Seconds per step of n requests whose longest cache holds `length` positions (None: the shortest length
        measured)."""
        return self.costs(n, (k,), length)[0]

    def costs(self, n: int, drafts: Sequence[Draft], length: int | None = None) -> list[float]:
        """cost(n, d, length) for every d, the length's segment found once (choose() prices every draft per
        window): each entry plus the batch size's per-window overhead (observe)."""
        extra = self.overhead.get(n, 0.0)
        return [c + extra for c in self._entries(n, drafts, length)] if extra else self._entries(n, drafts, length)

    def _entries(self, n: int, drafts: Sequence[Draft], length: int | None = None) -> list[float]:
        """The table's entries for n requests at `length` (interpolated), without the overhead."""
        lengths, seconds = self.lengths, self.seconds
        if length is None or len(lengths) == 1:
            return [self._over_n(n, d, lengths[0]) for d in drafts]
        i = 0
        while i < len(lengths) - 2 and length > lengths[i + 1]:
            i += 1
        a, b = lengths[i], lengths[i + 1]
        t = (length - a) / (b - a)
        out = []
        for d in drafts:
            lo, hi = seconds.get((n, d, a)), seconds.get((n, d, b))
            if lo is None or hi is None:  # n between the measured batch sizes
                lo, hi = self._over_n(n, d, a), self._over_n(n, d, b)
            out.append(max(lo + (hi - lo) * t, 0.5 * lo))
        return out

    def _over_n(self, n: int, k: Draft, length: int | None) -> float:
        """The entry for n requests at a measured length: interpolated between the measured batch sizes."""
        key = self._key(n, k, length)
        if key in self.seconds:
            return self.seconds[key]
        sizes = self.sizes(k)
        if not sizes:
            raise KeyError(f"no cost measured for {k}")
        lower = [s for s in sizes if s < n]
        upper = [s for s in sizes if s > n]
        if not lower:
            return self.seconds[self._key(upper[0], k, length)]
        if not upper:
            top = lower[-1]
            return self.seconds[self._key(top, k, length)] * n / top
        a, b = lower[-1], upper[0]
        t = (n - a) / (b - a)
        return (1 - t) * self.seconds[self._key(a, k, length)] + t * self.seconds[self._key(b, k, length)]

    def observe(self, n: int, k: Draft, seconds_per_step: float, length: int | None = None,
                switched: bool = False, probe: bool = False) -> None:
        """A window's measured seconds per step (its batch's longest cache: `length`). The machine's speed drifts (a
        shared VM, clocks, other work), and it drifts for every draft alike, while the choice depends only on the
        ratios between drafts: so a window's time first moves `drift`, the machine's current speed relative to the
        table (fast), and only what the drift does not explain moves the draft's own entry (slowly; at every length
        alike). Raw averages of window times judged each draft at the speed of the minutes it last ran in (measured:
        auto 0.95-0.96x the best fixed chain with them, 0.97-0.99x without).

        A window that followed one of another draft (`switched`) moves only that draft's switch factor: its cost over
        its entry then. A step's cost depends on the step before it: on this CPU an AR step at batch 4 took 2.53 ms
        right after a chain:8 step, 2.36 after one AR step, 2.14 in a run of them (its weights and activations evicted
        from the caches by the bigger step), while chain:8 after AR cost what it does in a run.

        How fast an entry learns: the drift follows the batch size's most observed draft (its `anchor`: at batch 1 the
        chain auto mostly runs), whose entry learns at COST_SMOOTHING, so the drift takes what moves every draft alike.
        Another draft's windows say how wrong its entry is against the anchor's: its residual over the drift against
        what the anchor's last windows left over it (ANCHOR_RATE; against the anchor's cost over its entry instead, a
        reference that stood still where the anchor stopped running, chain:16's entry fell 15 % below its cost at
        batch 1 and auto ran it for 553 windows: 0.930x the best fixed draft), while the anchor ran within the last
        ANCHOR_FRESH windows (a draft that runs alone has nothing to be told apart from: the drift takes its windows),
        and each moves its entry as a mean of its windows and ENTRY_PRIOR pseudo-windows of the startup timing would (at
        least COST_SMOOTHING): a draft that runs rarely had kept a startup entry timed in a slow minute for good
        (tree:16 16 % high against chain:8 at batch 1, never chosen again after its measurement:
        bench/results/2026-11-28-cpu-s28/NOTES.md section 4; a tree measurement's burst gives it such windows,
        AutoBudget._choose). Not a probe's window (`probe`: it costs over its entry what probes do, probe_factor): it
        moves the entry at the slow rate only, as every window did before; nor where the batch size has an overhead of
        some size (OVERHEAD_GATE; _fit_overhead): a line through its drafts' windows says what they cost apart, for the
        drafts not run too (chain:8's entry, learnt from its windows between AR's, took what the overhead is for: a
        window's fixed work, which prices every draft). Replayed (bench/results/2026-12-07-cpu-s29): learning fast from
        the probes' windows too, auto / the best fixed draft at batch 8 was 0.956 against 0.969 before; as here, 0.970.
        Gated at any overhead, tree:16's entry was never learnt at batch 1 (the replays' fits find small intercepts in
        their tables' noise)."""
        if not self.refine or seconds_per_step <= 0:
            return
        if switched:
            ratio = seconds_per_step / (self.cost(n, k, length) * self.drift)
            factor = self.switch.get(k, 1.0)
            factor *= math.exp(DRIFT_RATE * (math.log(ratio) - math.log(factor)))
            self.switch[k] = min(max(factor, 1 / MAX_PROBE_FACTOR), MAX_PROBE_FACTOR)
            return
        if n not in self.sizes(k):  # a batch size between the measured ones: starts from the interpolation
            for at in self.lengths:
                self.seconds[self._key(n, k, at)] = self._over_n(n, k, at)
            self._sizes[k] = sorted(self._sizes.get(k, []) + [n])
        entry = self._entries(n, (k,), length)[0]
        self._fit_overhead(n, entry, seconds_per_step / self.drift)
        priced = entry + self.overhead.get(n, 0.0)  # cost(n, k, length) with the overhead just fitted
        residual = math.log(seconds_per_step / (priced * self.drift))
        self.drift *= math.exp(DRIFT_RATE * residual)
        scale = math.exp(COST_SMOOTHING * (1 - DRIFT_RATE) * residual)  # (the anchor's, a probe's)
        if not probe:
            seen = self._seen[(n, k)] = self._seen.get((n, k), 0) + 1
            window = self._windows[n] = self._windows.get(n, 0) + 1
            anchor = self._anchor.get(n)
            if anchor is None or anchor[0] == k or seen > anchor[1]:
                left = (1 - DRIFT_RATE) * residual  # (over the drift it just moved)
                kept = left if anchor is None or anchor[0] != k else anchor[2] + ANCHOR_RATE * (left - anchor[2])
                self._anchor[n] = (k, seen, kept, window)
            elif (window - anchor[3] <= ANCHOR_FRESH
                  and self.overhead.get(n, 0.0) < OVERHEAD_GATE * self._entries(n, (anchor[0],), length)[0]):
                # against what the anchor's windows left over the drift (the drift lags a change of the machine's
                # speed; and the anchor's own windows, where it stopped running, would go stale)
                scale = math.exp(max(COST_SMOOTHING, 1.0 / (ENTRY_PRIOR + seen - 1)) * (residual - anchor[2]))
        seconds = self.seconds
        for key in self._keys(n, k):
            seconds[key] *= scale

    def _keys(self, n: int, d: Draft) -> list[tuple]:
        """(n, d)'s entries' keys, one per length the table has."""
        keys = self._keys_of.get((n, d))
        if keys is None:
            keys = self._keys_of[(n, d)] = [self._key(n, d, at) for at in self.lengths]
        return keys

    def _fit_overhead(self, n: int, entry: float, seconds: float) -> None:
        """A window of n requests whose draft's entry is `entry` took `seconds` per step (at the table's speed: over
        the drift): the batch size's overhead is the intercept of a line through such windows (least squares, the
        last ~1 / OVERHEAD_RATE windows; OVERHEAD_PRIOR pseudo-windows of a zero intercept), over its slope (what the
        drift takes), at least 0. A window's cost is not only its model step times the machine's speed: through the
        server on this CPU at 4 requests an AR window took 3.76 ms against its 2.43 entry (1.55x) and a chain:8 window
        9.86 against 7.64 (1.29x), 1.16x each plus 0.95 ms (the server's work on each window's events, sharing the
        cores); one ratio (the drift alone) priced chain:8 at 1.55x its entry, and auto held AR at 0.98x AR where
        chain:8 gave 1.20x (2026-11-27). Windows whose entries hardly differ (a single draft) leave it where it was:
        the drift takes them. Measured through the OpenAI server on this CPU (alternating with the code before it, 6
        pairs, 2026-11-27): auto / AR at concurrency 4 / 8 / 16 1.033 / 0.953 / 0.962 -> 1.170 / 0.958 / 1.007 (at 4 it
        now drafts, τ 3.0 against 1.6); in-process at batch 1 / 8 (3 pairs) auto / the best fixed draft 0.988 / 1.063
        -> 0.982 / 1.116. Replays on acceptance traces, whose windows carry no such overhead, lose 0.5 % (the fit
        finds intercepts in their tables' noise)."""
        fit = self._fits.get(n)
        if fit is None:
            fit = self._fits[n] = [0.0] * 5
        keep = 1 - OVERHEAD_RATE
        w, sx, sy, sxx, sxy = fit[:] = (keep * fit[0] + 1.0, keep * fit[1] + entry, keep * fit[2] + seconds,
                                        keep * fit[3] + entry * entry, keep * fit[4] + entry * seconds)
        if sxx * w - sx * sx < OVERHEAD_SPREAD * sx * sx:  # entries too alike (one draft, its lengths): no line
            return
        # [sxx sx; sx w + prior] [slope; intercept] = [sxy; sy]
        det = sxx * (w + OVERHEAD_PRIOR) - sx * sx
        slope = (sxy * (w + OVERHEAD_PRIOR) - sx * sy) / det
        intercept = (sxx * sy - sx * sxy) / det
        if slope > 0:
            extra = intercept / slope
            self.overhead[n] = (0.0 if extra <= 0  # (the cap's entries looked up only where there is one to cap)
                                else min(extra, MAX_OVERHEAD * min(self._entries(n, list(self._sizes)))))

    def observe_probe(self, n: int, k: Draft, seconds_per_step: float, length: int | None = None) -> None:
        """A probe's window (the first drafting window after an AR stretch): its cost against its entry moves
        probe_factor halfway (in log), before `observe` takes the window as any other."""
        if not self.refine or seconds_per_step <= 0:
            return
        ratio = seconds_per_step / (self.cost(n, k, length) * self.drift)
        self.probe_factor = min(max(math.sqrt(self.probe_factor * ratio), 1 / MAX_PROBE_FACTOR), MAX_PROBE_FACTOR)


@dataclass
class TreeCounts:
    """A tree size's steps, counted twice at the depths its argmax chain reaches in the tree: what the tree accepted,
    and what that chain would have."""

    tree: "AcceptanceCounts"
    chain: "AcceptanceCounts"


@dataclass
class AcceptanceCounts:
    """Per draft position j (0-based): steps that verified draft j + 1 after accepting drafts 1..j, and how many of
    them accepted it."""

    accepted: np.ndarray
    trials: np.ndarray
    version: int = 0  # counts `add` calls: estimates computed from these counts stay valid while it is unchanged
    _steps: tuple = field(init=False, default=(None, 0.0), repr=False, compare=False)  # (version, steps)

    @classmethod
    def empty(cls, positions: int) -> "AcceptanceCounts":
        return cls(np.zeros(positions), np.zeros(positions))

    def steps(self) -> float:
        """The steps counted (the trials at the first position), read from the array once per version: the budget
        asks every window, and a numpy read after the model's step cost ~2-3 us on this CPU."""
        if self._steps[0] != self.version:
            self._steps = (self.version, float(self.trials[0]))
        return self._steps[1]

    def add(self, ks: Sequence[int], taus: Sequence[int]) -> None:
        """Steps that could each accept up to K - 1 drafts (a chain of K; a tree whose depth is K - 1) and accepted
        τ - 1 of them."""
        positions = self.trials.shape[0]
        stops = [[0] * (positions + 1), [0] * (positions + 1)]
        for k, t in zip(ks, taus):
            _stop(stops, k, t, 1)
        self.add_counts(*_reached(np.array(stops, dtype=float)))

    def add_counts(self, accepted: np.ndarray, trials: np.ndarray) -> None:
        """Per position, the steps that accepted the draft there and those that verified it."""
        self.accepted = self.accepted + accepted
        self.trials = self.trials + trials
        self.version += 1


def _stop(stops: list, k: int, tau: int, weight) -> None:
    """A step that could accept up to K - 1 drafts and accepted τ - 1, added (`weight`) to `stops` [accepted, trials]
    [depth 0..B-1] at the depths where its accepted drafts and its trials end: with a = τ - 1 accepted, drafts 1..a
    accepted, draft a + 1 rejected (a trial, if the step verified it). K beyond the block counts as the block."""
    k = min(k, len(stops[0]))
    stops[0][min(tau, k) - 1] += weight
    stops[1][min(tau, k - 1)] += weight


def _as_emitted(k: int, tau: int) -> int:
    """A finished sequence's last step (K, τ) counted as deep as it emitted: its τ may have been cut there (the tokens
    it had left, a stop token), so its next draft's verdict is no trial."""
    return min(k, tau)


def _reached(stops: np.ndarray) -> np.ndarray:
    """[..., depth 0..B-1] weights of steps by the depth where they end (_stop) -> [..., position 0..B-2] their sum
    over the steps that reach past each position: the counts per draft position, for steps taken in by the hundred
    with a few numpy calls (a mask per step and position made the take-in ~30 numpy calls, ~270 us every ~12 windows
    after the model's steps at batch 1 on this CPU)."""
    return np.cumsum(stops[..., :0:-1], axis=-1)[..., ::-1]


class Fixed:
    """Always the same draft."""

    def __init__(self, draft: Draft):
        self.draft = draft
        self.drafts = [draft]  # what its windows may run (as AutoBudget.drafts)

    def choose(self, requests: Sequence[Hashable], left: Sequence[int] | None = None,
               length: int | None = None) -> Draft:
        return self.draft

    def observe(self, request_id: Hashable, draft: Draft, taus: Sequence[int],
                chain_equivalent: Sequence[tuple[int, int]] = ()) -> None:
        pass

    def observe_window(self, requests: Sequence[Hashable], draft: Draft, taus: Sequence[Sequence[int]],
                       chain_equivalent: Sequence[Sequence[tuple[int, int]]] = (),
                       finished: Sequence[bool] = ()) -> None:
        pass

    def observe_time(self, n: int, draft: Draft, seconds_per_step: float, length: int | None = None) -> None:
        pass

    def choose_ahead(self, requests: Sequence[Hashable], left: Sequence[int] | None = None,
                     length: int | None = None, steps: int = 1) -> Draft:
        return self.draft

    def commit_ahead(self) -> Draft:
        return self.draft

    def prepare(self, now: bool = False, tables: bool = True) -> None:
        pass

    def defers_context(self, n: int, length: int | None = None) -> bool:
        return False

    hold_limits = (None, 0)

    def hold(self, steps: int = 1, left: Sequence[int] | None = None, length: int | None = None) -> int:
        return 0

    def held(self, windows: int) -> None:
        pass

    def needs_context(self, steps: int = 1) -> bool:
        return True

    def forget(self, request_id: Hashable) -> None:
        pass

    def describe(self) -> str:
        return str(self.draft)


def measured_prior(sequences: Sequence[tuple[Sequence[int], Sequence[int]]], positions: int) -> list[float]:
    """The drafter's measured curve as auto's prior (`AutoBudget.prior`; `dflash-trt build` records it in the engine
    directory from its acceptance gate): per draft position, the steps that accepted the draft there over those that
    verified it, counted as auto counts its own chain steps (`_stop`; a sequence's last step as deep as it emitted), from
    finished sequences' chain steps, each sequence a pair (K per step, τ per step) as `Stats.ks` / `Stats.taus`
    hold them. Shrunk toward DEFAULT_PRIOR by PRIOR_WEIGHT pseudo-steps, so a position few steps reached (or none: a
    chain shorter than the block) stays near it, and kept within [1 - MAX_ACCEPTANCE, MAX_ACCEPTANCE]."""
    counts = AcceptanceCounts.empty(positions)
    ks: list[int] = []
    taus: list[int] = []
    for seq_ks, seq_taus in sequences:
        if len(seq_ks) != len(seq_taus):
            raise ValueError(f"measured_prior: a sequence has {len(seq_ks)} K for {len(seq_taus)} steps")
        if seq_taus:
            ks += list(seq_ks[:-1]) + [_as_emitted(seq_ks[-1], seq_taus[-1])]
            taus += list(seq_taus)
    counts.add(ks, taus)
    g = _shrink([DEFAULT_PRIOR] * positions, counts.accepted, counts.trials, PRIOR_WEIGHT)
    return [round(float(p), 4) for p in np.clip(g, 1 - MAX_ACCEPTANCE, MAX_ACCEPTANCE)]


def prior_problem(prior, positions: int) -> str | None:
    """What is wrong with `prior` as a prior over `positions` draft positions (at least that many probabilities in
    (0, 1), the first `positions` used), or None."""
    if isinstance(prior, (str, bytes)) or not isinstance(prior, Sequence):
        return f"needs a list of {positions} probabilities in (0, 1), got {type(prior).__name__}"
    if len(prior) < positions:
        return f"needs {positions} probabilities (one per draft position of the block), got {len(prior)}"
    bad = [p for p in prior[:positions]
           if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < 1]
    if bad:
        return f"needs probabilities in (0, 1), got {bad[0]!r}"
    return None


def auto_drafts(block_size: int, trees: Sequence[int] = ()) -> list[Draft]:
    """What auto chooses among: chains of 1, 2, 4, ... and the drafter's block; then trees of the given sizes."""
    return [Draft("chain", k) for k in candidates(block_size)] + [Draft("tree", n) for n in trees]


@dataclass
class TreeClock:
    """When auto last measured a tree size: windows chosen since the clock started (a measurement window every
    tree_probe_every) and the predicted seconds of the windows since the last measurement or probe. One per engine,
    shared by its schedulers' budgets."""

    windows: int = 0
    since_s: float = 0.0
    # (tree size, windows left) of a measurement's burst under way, at one request (AutoBudget._choose)
    burst: tuple | None = None


@dataclass
class Calibration:
    """What the drafts' windows accepted against what the estimates expected of them when they were chosen: decayed
    sums of drafted tokens (τ - 1 per request and step), accepted and expected, for the chains and for the trees. The
    choice scales each draft's expected drafted tokens by their ratio (`factor`). One per engine, shared by its
    schedulers' budgets.

    Why: the estimates are biased, and by draft. Measured on this CPU at batch 1 (fixture pair, 40 eagle_gsm8k
    prompts, 2026-11-27) with an auto budget observing fixed-draft runs window by window (no selection): chain:8's
    windows accepted τ 3.72 where 3.50 was expected (the curve keeps every step since the engine started, and the first
    prompts accept less), tree:16's 4.81 where 5.03 was (a tree's counts stop where its argmax chain ends in the tree,
    on the steps where the drafter was sure enough to grow it deep): tree:16 looked 1.40x chain:8 where it accepts
    1.29x, at 1.31x the cost, and auto ran it in most batch-1 windows, 0.94-0.95x chain:8. Scaled by the measured
    ratios (fixed, two runs) it ran chain:8, 0.976-0.996x; learnt, as here, level with the code before over 11
    alternating batch-1 pairs (runs of either settle on tree:16 at times: the bias was not what decides a run). The
    trees' part of that bias has since gone at its source (a tree step's argmax chain counted one depth past the
    tree: spec/tree.chain_equivalent; tree:16's estimate 1.7 % low where it was 5.5 % high, replayed); the chains'
    remains (the curve lags prompts that get easier), and every factor fades with every window (age)."""

    # "chain" (every chain's windows: their estimates share one curve) or "tree" (every tree size's) -> [accepted
    # drafted tokens, expected drafted tokens], decayed
    sums: dict = field(default_factory=dict)
    version: int = 0  # counts `add` and fading calls: prices computed with these factors stand while it is unchanged
    aged_at: int = 0  # the window clock when the sums last faded (age)
    _factors: tuple = field(init=False, default=(None, None), repr=False, compare=False)  # (version, drafts), factors

    def factor(self, d: Draft) -> float:
        """Accepted over expected drafted tokens: the chains' (CALIBRATION_PRIOR pseudo-tokens at 1), or the
        trees', whose pseudo-tokens are at the chains' factor (a tree's estimate is made from the chain's curve: trees
        measured little are as biased as the chain, not unbiased — else a tree looked better than a chain with the
        same estimate, for not having run). One factor for every chain, though chain:16's drafts past chain:8's are
        expected high (counted on the steps that reach there) where chain:8's are expected low: in 2 of 13 batch-1 runs
        on this CPU the factor learnt on chain:8 sent 84-144 windows to chain:16 (0.950 / 0.886x chain:8). Calibrated
        per draft or with those drafts apart it did worse (0.89-0.97; bench/results/2026-11-27-cpu-s16)."""
        return self._ratio(self._key(d), self._ratio("chain", 1.0) if d.tree else 1.0)

    def factors(self, drafts: Sequence[Draft]) -> dict[Draft, float]:
        """factor(d) for each draft, kept while the sums stand (the choice prices every draft per batch)."""
        if self._factors[0] != (self.version, drafts):
            self._factors = (self.version, drafts), {d: self.factor(d) for d in drafts}
        return self._factors[1]

    @staticmethod
    def _key(d: Draft) -> str:
        """What d's windows calibrate: every chain's together ("chain"), every tree size's together ("tree"): each
        tree's estimate is its chain's curve times its miss factor, and its bias measured the same for both sizes
        (drafted tokens accepted over expected: tree:16 0.95 at batch 1 on this CPU, tree:32 0.94 in the H200-cost
        replay). Apart, the size that ran learnt its factor and the one that did not kept the prior, so at equal cost
        (an H200) tree:32, calibrated down, could lose to a less-measured tree:16 (one H200 run at batch 1 ran tree:16
        in 51 of 322 windows, τ 5.07 against tree:32's 5.59: 2026-11-27, bench/results/2026-11-27-gpu-h200-s18, no
        trace to tell why); together, the order of the sizes is their paired miss factors' (AutoBudget._estimates),
        which nest."""
        return "tree" if d.tree else "chain"

    def _ratio(self, key: str, prior: float) -> float:
        """key's accepted over expected drafted tokens, with CALIBRATION_PRIOR pseudo-tokens at `prior`, within
        [1 / MAX_CALIBRATION, MAX_CALIBRATION]."""
        accepted, expected = self.sums.get(key, (0.0, 0.0))
        ratio = (CALIBRATION_PRIOR * prior + accepted) / (CALIBRATION_PRIOR + expected)
        return min(max(ratio, 1 / MAX_CALIBRATION), MAX_CALIBRATION)

    def add(self, windows: Sequence[tuple[Draft, float, float]]) -> None:
        """Windows as (draft, drafted tokens accepted, drafted tokens expected when it was chosen), in order."""
        for d, accepted, expected in windows:
            sums = self.sums.setdefault(self._key(d), [0.0, 0.0])
            sums[0] = CALIBRATION_DECAY * sums[0] + accepted
            sums[1] = CALIBRATION_DECAY * sums[1] + expected
        self.version += 1

    def age(self, windows: int) -> None:
        """The sums as of `windows` windows chosen (the engine's window clock, TreeClock.windows: every draft's, AR's
        too): faded by CALIBRATION_AGING per window since they last faded, once CALIBRATION_AGE have passed.

        Why every window's, not only the windows of the sums' own kind: what a factor says of its kind's estimate gets
        old as the text moves on, whichever draft runs. Faded only by their own windows, a kind that stopped running
        kept the factor its last windows taught, and a factor that had fallen stopped the kind from running: at batch
        1 on this CPU (2026-11-27, 40 prompts, generate() per prompt) the chains' factor fell to 0.85 over the first
        ~120 windows (chosen where their estimate was high, they accepted less than it said) and AR, which is not
        calibrated, then ran for 400-800 windows at 0.6x chain:8's speed, the factor standing all the while (probes
        do not calibrate). Replayed on the sim-v2 traces at batch 1 (40 seeds), auto / best fixed with AR 20 % cheaper
        0.9925 (min 0.939) -> 1.0051 (min 0.993), 10 % cheaper 0.9945 -> 1.0041, at the traces' costs with trees 5 %
        dearer 0.997 -> 1.000; batch 8 / 16 and the H200 replay level; in the engine (five runs a side) AR ran 54-173
        windows of ~1,000 against 83-1,021 (bench/results/2026-11-27-cpu-s20)."""
        if not self.would_age(windows):
            return
        fade = CALIBRATION_AGING ** (windows - self.aged_at)
        for sums in self.sums.values():
            sums[0] *= fade
            sums[1] *= fade
        self.aged_at = windows
        self.version += 1

    def would_age(self, windows: int) -> bool:
        """Whether age(windows) would fade the sums (a held window must not be one: AutoBudget.hold)."""
        return windows - self.aged_at >= CALIBRATION_AGE


@dataclass(eq=False)
class GlobalTables:
    """The estimates at the drafter's curve over every request, as of the curve's version: the curve shrunk toward
    the prior, each tree size's miss factor, E[τ] by cap of the chain and of each tree size at that curve (a request
    with no counts of its own: every request before its first drafted steps are taken in) and, per cap, E of every
    draft there. One per engine, beside the curves they are made from (kept by its schedulers' budgets alike): each
    new budget — a scheduler per generate() call — starts from them instead of making them again. Made per budget,
    they were ~130 us of auto's ~170 us of setup per request at batch 1 on this CPU (warm; a fixed draft's: ~5 us),
    on the critical path before the request's first window (its prefill's defers_context, then its first choice);
    on an H200 a batch-1 request takes ~40 ms (2026-11-27)."""

    curve: "AcceptanceCounts | None" = None  # the curve they were made from (the engine's), and the inputs below
    tree_curves: dict | None = None  # ... and the trees' counts (a tree's counts change only with the curve)
    key: tuple | None = None  # (its version, the optimisms, prior, tree sizes, block size)
    g: np.ndarray | None = None  # the curve shrunk toward the prior
    misses: dict | None = None  # tree size -> its miss factor per depth
    depth: np.ndarray | None = None  # [table, cap]: E[τ] at g (AutoBudget._depth_tables), made when first asked
    at_cap: dict = field(default_factory=dict)  # cap -> E per draft (the budget's drafts' order) at g
    optimism: list | None = None  # per cap (its index): each draft's optimism factor less 1 (_optimism); None: none


@dataclass
class AutoBudget:
    """Chooses the draft per window (see the module docstring)."""

    block_size: int
    cost: CostTable
    prior: Sequence[float] | None = None  # per draft position 1..B-1; default DEFAULT_PRIOR everywhere
    probe_every: int = 4
    curve: AcceptanceCounts | None = None  # the drafter's chain counts over every request (shared; default: new)
    trees: Sequence[int] = ()  # tree sizes to choose among (() where the target cannot verify trees)
    tree_curves: dict[int, TreeCounts] | None = None  # per tree size, over every request (shared)
    tree_probe_every: int = 8
    tree_clock: TreeClock | None = None  # when trees were last measured (the engine's, shared; default: new)
    calibration: Calibration | None = None  # per draft, accepted over expected (the engine's, shared; default: new)
    tables: GlobalTables | None = None  # the estimates at the curve (the engine's, shared; default: new)
    explore_share: float = EXPLORE_SHARE  # the most of the time since the last probe a probe may lose (its regret)
    explore_spread: float = EXPLORE_SPREAD  # a probe's regret counts over its chance of finding drafting ahead (_chance)
    optimism: float = OPTIMISM  # pseudo-steps accepting everywhere in the curve drafts are priced at (_optimism)
    tree_optimism: float = TREE_OPTIMISM  # ... and in each tree size's counts (_optimism)
    _rows: dict = field(init=False, default_factory=dict)  # request -> its row of _counts (requests observed)
    _at_one: int = field(init=False, default=0)  # windows in a row at K = 1
    _probe_interval: int = field(init=False, default=0)  # windows at K = 1 before the next probe
    # predicted seconds of the windows at K = 1 since the last probe or tree measurement
    _held_s: float = field(init=False, default=0.0)
    # an AR choice held on merit: its priced seconds and its probe's regret then (hold, _near_probe); None otherwise
    _probe_wait: tuple | None = field(init=False, default=None)
    # an AR choice (on merit): the least regret of a tree size's measurement window, and the seconds each window adds
    # to the tree clock (as priced then); None if every tree size is measured (_tree_near)
    _tree_wait: tuple | None = field(init=False, default=None)
    # ... and whether the drafter's curve would draft for one request fewer (a batch of one: for it) (ditto)
    _curve_drafts: bool = field(init=False, default=False)
    # a drafting choice held on merit (hold): ((its requests, draft), its batch's expected tokens), from its hold() to
    # its held(); None otherwise
    _paired: tuple | None = field(init=False, default=None)
    # after hold() > 0: the batch's longest cache below which, and the tokens left per request from which, the held
    # windows are those choose() would choose (None, 0: no bound); the scheduler ends the hold where they are not
    hold_limits: tuple = field(init=False, default=(None, 0))
    _probing: Draft | None = field(init=False, default=None)  # the last window's draft, if it was a probe
    _measuring: bool = field(init=False, default=False)  # whether the last window measured a tree size (_choose)
    _last: Draft | None = field(init=False, default=None)  # the last window's draft (the next one's switch is priced)
    _observed: Draft | None = field(init=False, default=None)  # the last window observe_time saw
    _forgotten: int = field(init=False, default=0)  # forget() calls: part of the estimates' cache key
    _faded: int = field(init=False, default=0)  # AR windows that faded requests' counts (_fade): ... too
    _fading: dict = field(init=False, default_factory=dict)  # row -> AR steps not applied to its counts yet (_fade)
    _expected: tuple = field(init=False, default=((), {}))  # (key, draft -> sum over the requests of E_r(draft))
    _row_e: tuple = field(init=False, default=(None, {}))  # (tables' key, (row, cap) -> E per draft): _expected_tokens
    _prefixes: tuple = field(init=False, default=((), None))  # (key, every row's E by depth: see prepare)
    _defers: tuple = field(init=False, default=(None, None))  # (curve version, E per draft at the global curve)
    _ending: set = field(init=False, default_factory=set)  # requests forgotten while their steps wait to be taken in
    _pending: list = field(init=False, default_factory=list)  # windows observed, not taken in yet (observe_window)
    _pending_steps: int = field(init=False, default=0)  # ... their steps (the most any request took per window)
    # (requests, draft) of the last exploring window in an AR stretch (a probe, or a tree measurement there) until its
    # observations come: they are taken in at once (prepare), and until then no window is held (hold)
    _exploring: tuple | None = field(init=False, default=None)
    _explored: bool = field(init=False, default=False)  # ... they came: the next prepare() takes them in
    _ahead: tuple | None = field(init=False, default=None)  # choose_ahead's: (batch key, draft, decision states, pricing)
    _pricing: tuple | None = field(init=False, default=None)  # (its key, windows it may still serve, _priced's tuple)
    # (batch, tables, calibration): its expected tokens, calibrated and raw
    _calibrated_e: tuple = field(init=False, default=((), None, None))
    _measured_trees: bool = field(init=False, default=False)  # every tree size measured enough (_unmeasured)
    # (requests, draft) -> the batch's expected tokens of a step of the draft chosen for it (raw: see Calibration)
    _chosen: dict = field(init=False, default_factory=dict)
    # drafted steps observed since the last plain AR window (needs_context False), whose requests' drafter lost its
    # context: a drafting window is calibrated only once TAP_LEAD of them have fed it again (choose)
    _fed: int = field(init=False, default=TAP_LEAD)

    def __post_init__(self):
        self.drafts = auto_drafts(self.block_size, self.trees)
        self._sizes = sorted(self.trees)
        # per draft (self.drafts' order): which E-by-depth table it reads (0: the chain's, 1 + i: the i-th tree
        # size's) and the deepest τ it allows (its column there before a request's cap)
        self._source = np.array([0 if not d.tree else 1 + self._sizes.index(d.size) for d in self.drafts])
        self._depth = np.array([d.max_tau(self.block_size) for d in self.drafts])
        self._tree_columns = [i for i, d in enumerate(self.drafts) if d.tree]  # ascending sizes
        self._probe_interval = self.probe_every
        if not self.explore_share > 0:
            raise ValueError(f"explore_share must be > 0 (a share of the time spent waiting), got {self.explore_share!r}")
        if not self.explore_spread > 0:
            raise ValueError(f"explore_spread must be > 0 (a log-spread of the drafting rate; inf: every probe is "
                             f"worth its regret), got {self.explore_spread!r}")
        for name in ("optimism", "tree_optimism"):
            if not 0 <= getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be >= 0 and finite (pseudo-steps accepted at every depth; 0: none), "
                                 f"got {getattr(self, name)!r}")
        positions = self.block_size - 1
        prior = list(self.prior) if self.prior is not None else [DEFAULT_PRIOR] * positions
        problem = prior_problem(prior, positions)
        if problem:
            raise ValueError(f"prior: {problem}")
        self._prior = prior[:positions]
        # per observed request, its chain counts [accepted, trials] decayed per step (a row each, reused after
        # forget); row 0 stays zero: the requests not observed yet (their curve is the global one)
        self._counts = np.zeros((8, 2, positions))
        self._free_rows = list(range(7, 0, -1))
        if self.curve is None:
            self.curve = AcceptanceCounts.empty(positions)
        if self.tree_curves is None:
            self.tree_curves = {}
        if self.tree_clock is None:
            self.tree_clock = TreeClock()
        if self.calibration is None:
            self.calibration = Calibration()
        if self.tables is None:
            self.tables = GlobalTables()
        # what the shared tables are made for, besides the curve's version (_estimates)
        self._tables_for = (tuple(self._prior), tuple(self.trees), self.block_size)
        for n in self.trees:
            if n not in self.tree_curves:
                self.tree_curves[n] = TreeCounts(AcceptanceCounts.empty(positions), AcceptanceCounts.empty(positions))
        counts = [self.curve] + [c for t in self.tree_curves.values() for c in (t.tree, t.chain)]
        if any(len(c.trials) != positions for c in counts):
            raise ValueError(f"the acceptance counts must have {positions} positions (the block's drafts)")
        missing = [str(d) for d in self.drafts if not self.cost.sizes(d)]
        if missing:
            raise ValueError(f"the cost table has no entry for {', '.join(missing)}")

    # ---- estimates -------------------------------------------------------------------------------------------------

    def acceptance(self, request_id: Hashable | None = None, draft: Draft = Draft("chain", 2)) -> list[float]:
        """p(j) for depths 1..B-1 of `draft` (chains; a tree: the chain's misses times its miss factor): the global
        estimate, or a request's (every observation taken in)."""
        if self._pending:
            self._take_in()
        g, misses = self._estimates()
        p = self._chain_curves([request_id], g)[0]
        return (_treed(p, misses[draft.size]) if draft.tree else p).tolist()

    def miss(self, size: int) -> list[float]:
        """Per depth: the tree's rejection rate over its argmax chain's on the same tree steps (1 where unmeasured)."""
        if self._pending:
            self._take_in()
        return self._estimates()[1][size].tolist()

    def _chain_curves(self, requests: Sequence[Hashable | None], g: np.ndarray) -> np.ndarray:
        """Per request (rows): its chain curve, its decayed counts shrunk toward the global curve g (g itself for a
        request without counts)."""
        return _requests_shrunk(g, self._counts[[self._rows.get(r, 0) for r in requests]])

    def _estimates(self) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """The drafter's chain curve over every request (shrunk toward the prior) and each tree size's miss factor, as
        of the curve's version: every observation adds to the curve, so a new version may change any of them. A miss
        factor is the tree's rejection rate over its paired chain's, their counts each shrunk toward a prior: the
        chain's toward the global curve, the tree's toward the global curve as the next smaller tree's factor makes it
        (the chain's for the smallest) — best-first trees nest, so a larger tree accepts at least what a smaller one
        does, and its few measurements (a size measured less because a smaller one was chosen) refine the smaller's
        factor instead of pulling toward 1: shrunk toward the chain, tree:32 after its 16 measured steps looked no
        better than a much-measured tree:16, and at equal cost (an H200) tree:16 was chosen for half the windows at
        batch 1, 0.92x tree:32."""
        t = self.tables
        if (t.curve is not self.curve or t.tree_curves is not self.tree_curves
                or t.key != (self.curve.version, self.optimism, self.tree_optimism) + self._tables_for):
            g = _shrink(self._prior, self.curve.accepted, self.curve.trials, PRIOR_WEIGHT)
            misses = self._misses(g)
            t.curve, t.tree_curves = self.curve, self.tree_curves
            t.key = (self.curve.version, self.optimism, self.tree_optimism) + self._tables_for
            t.g, t.misses, t.depth, t.at_cap = g, misses, None, {}
            t.optimism = None
            if self.optimism > 0 or self.tree_optimism > 0:  # (_optimism): per cap, each draft's factor less 1
                bold = _shrink(self._prior, self.curve.accepted + self.optimism, self.curve.trials + self.optimism,
                               PRIOR_WEIGHT)
                bold_misses = self._misses(g, self.tree_optimism) if self.tree_optimism > 0 else misses
                both = np.concatenate([self._depth_tables(g[None], misses), self._depth_tables(bold[None], bold_misses)])
                caps = list(range(1, self.block_size + 1))
                t.depth = both[0]  # (the curve's own tables, as _rows_expected would make them: made once)
                mean, high = self._at_caps(np.repeat(both, len(caps), 0), caps * 2).reshape(2, len(caps), -1)
                extra = np.where(mean > 1, (high - 1) / np.maximum(mean - 1, 1e-12) - 1, 0.0)
                t.optimism = [None] + extra.tolist()  # (indexed by cap)
        return t.g, t.misses

    def _misses(self, g: np.ndarray, bold: float = 0.0) -> dict[int, np.ndarray]:
        """Each tree size's miss factor at the chain curve g (_estimates); `bold`: with that many more tree steps
        counted, each accepted at every depth (_optimism's, for a tree measured little)."""
        misses, below = {}, np.ones_like(g)
        for size in self._sizes:
            tree, chain = self.tree_curves[size].tree, self.tree_curves[size].chain
            # (the prior unclipped: where the chain is near sure, a clipped one made the factor 2 at depth 1)
            misses[size] = below = (
                (1 - _shrink(_treed(g, below, 1.0), tree.accepted + bold, tree.trials + bold, TREE_PRIOR_WEIGHT))
                / (1 - _shrink(g, chain.accepted, chain.trials, TREE_PRIOR_WEIGHT)))
        return misses

    def _optimism(self, cap: int | None = None) -> dict[Draft, float]:
        """Per draft, its drafted tokens (E - 1 at a request's cap on τ; default: the block) at the optimistic curve
        over those at the curve, both over every request. The optimistic curve counts `optimism` more steps at every
        depth, each accepted. The choice scales each request's drafted tokens of every draft by this at its cap
        (_optimistic; then the calibration: _calibrated): optimism where the curve is thin, so that an estimate made
        from a few steps is tried instead of trusted. It is ~1 + optimism / (the steps at the depths that decide), so
        it fades as they are counted (chain:8: 1.48 at no steps, 1.04 at 100, 1.004 at 1,000), and is largest for the
        drafts whose deep depths few steps reach.

        Why: a long-lived scheduler (a server) held at AR at higher load learns the curve only from its probes. After
        a round at 16 requests the curve held 12 steps of one probe window (its requests' steps at one moment, their
        drafter cold), p1 0.33-0.58 against 0.72 once measured; at one request the batch then held AR in 265-559
        windows of a round on the global estimate alone, at 0.83-1.01x drafting's priced rate (in-process, this CPU,
        bench/results/2026-11-28-cpu-s23). Each probe there adds one step, and a probe that finds AR still best
        doubles the wait for the next: a thin curve stays thin and AR stays chosen (a lock-in). Priced optimistically,
        a near tie drafts, and the drafting windows measure the curve. The calibration still pairs a window with the
        curve's own expectation (else it would learn to cancel the optimism, and keep the cancelling once the curve is
        measured).

        A tree size's own counts (its miss factor, from the steps it ran, paired with its argmax chain's) get
        `tree_optimism` such steps: a tree that ran little is priced above its mean estimate, that estimate being
        shrunk toward its chain's (TREE_PRIOR_WEIGHT) and so low wherever the tree's deep steps are few. Why: at batch 1
        on this CPU tree:16 is best (~1.34x AR) and chain:8 a near second (~1.31x, ~20 % cheaper a window). Trees are
        only measured in their TREE_MEASURE_STEPS windows, and after an unlucky measurement tree:16 was never chosen
        again: 6 of 26 standard-bench runs ran tree:16 in its 16 measurement windows only, 0.936-0.992x the best fixed
        (s27's runs); replayed on s24's traces, 4 of 10 seeds did so, and over 8 seeds auto / best fixed was 0.991
        (min 0.962). With 0.5: 1.010 (min 1.007), batch 8 0.949 -> 0.969, batch 16 level (1.087 / 1.083), continuous
        arrivals level; with 2, batch 1 1.018 but batch 16 1.059: trees tried at 2-16 requests, where they cost 1.5-2x
        chain:8's window. Standard bench, 8 pairs: batch 1 0.970 -> 0.986 (≥ 0.97 in 5 -> 8 of 8 runs), batch 8 level
        (bench/results/2026-11-28-cpu-s28/NOTES.md)."""
        self._estimates()
        extra = self.tables.optimism
        row = [0.0] * len(self.drafts) if extra is None else extra[self.block_size if cap is None else cap]
        return {d: 1.0 + x for d, x in zip(self.drafts, row)}

    def _optimistic(self, pairs: Sequence[tuple[int, int]], expected: dict[Draft, float]) -> dict[Draft, float]:
        """A batch's expected tokens per draft (the requests' (row, cap) pairs, whose entries _rows_expected holds),
        each request's drafted tokens scaled by the draft's optimism at its cap (_optimism)."""
        self._estimates()
        extra = self.tables.optimism
        if extra is None:
            return expected
        cache, out, by_cap = self._row_e[1], list(expected.values()), {}
        for p in pairs:  # (summed per cap first: most requests share the block's)
            by_cap.setdefault(p[1], []).append(cache[p])
        for cap, rows in by_cap.items():
            for i, (x, e) in enumerate(zip(extra[cap], map(sum, zip(*rows)))):
                out[i] += x * (e - len(rows))
        return dict(zip(expected, out))

    @staticmethod
    def expected_tokens(p: Sequence[float], k: int) -> float:
        """E[τ] of a step that can accept up to K - 1 drafts: 1 + sum over i < K of the chance depths 1..i are all
        accepted."""
        return float(_expected_by_depth(np.asarray(p, dtype=float))[k])

    # ---- the choice ------------------------------------------------------------------------------------------------

    def choose(self, requests: Sequence[Hashable], left: Sequence[int] | None = None,
               length: int | None = None) -> Draft:
        """The next window's draft for a batch of `requests`; `left`: the tokens each one may still emit (None: no
        limit); `length`: the batch's longest cache (what its steps' attention reads; None: the cost table's
        shortest). What choose_ahead chose, if it chose for this batch."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and self._fits(ahead[0], requests, left) and ahead[2] == self._decision()[:-1]:
            return self._take_ahead(ahead)
        self._probe_wait, self._tree_wait, self._curve_drafts = None, None, False
        self._last = self._choose(requests, left, length)
        if self._probing is not None:
            self._exploring = (tuple(requests), self._last)
        # what its window is expected to accept, for the calibration (observe_window); not a probe's (nor a tree
        # measurement's in an AR stretch): its drafter sees the context the AR windows left pending, or none of it,
        # and accepts less for that — a drafting window on merit does not (held at AR through the server at 4
        # requests, auto / AR 1.15 -> 1.04, τ 1.16, with the probes' windows in the chains' factor)
        # nor a window whose drafter lost its context in plain AR windows and has not been fed TAP_LEAD steps since:
        # a batch held at AR that drains to a few requests drafts on merit with such a drafter, accepting 0.25-0.49 of
        # what is expected; counted, auto held AR in 5 of 8 runs in-process at 4 requests with 1 ms of host work per
        # window (0.95-1.03x AR where chain:8 gave 1.12-1.19x; in 4 of them the chains' factor had fallen to
        # 0.72-0.78); with the factors at 1 it drafted in 3 of 3, and with this rule in 4 of 4 (1.07-1.12x):
        # bench/results/2026-11-27-cpu-s17/NOTES.md
        if self._last.size > 1 and self._probing is None and self._fed >= TAP_LEAD:
            if len(self._chosen) >= 64:  # (choices whose windows never came: made ahead and not used)
                self._chosen.clear()
            self._chosen[(tuple(requests), self._last)] = self._pricing[2][6][self._last]  # (this batch's: _choose)
        return self._last

    def hold(self, steps: int = 1, left: Sequence[int] | None = None, length: int | None = None) -> int:
        """After choose() (`left`, `length`: what it was given): how many more windows (of `steps` steps) the same batch
        may run at the draft just chosen with no call to the budget in between (choose, observe_*, prepare,
        needs_context, forget) — their times, observations and forgets handed over after them, in order, then `held`
        with their number — while the batch's longest cache stays below hold_limits[0] and each request has at least
        hold_limits[1] tokens left (the scheduler ends the hold at the first window where not). 0 otherwise.

        A batch held at AR on merit: up to what its pricing still serves (PRICE_WINDOWS, within LENGTH_STEP positions),
        none of them a window where a probe or a tree measurement could come, the calibration fades (Calibration.age) or
        every request has its last token left, all of them feeding the drafter or none (needs_context), and none
        priced on counts its AR steps faded (_windows_to_fade). Each of those windows would be AR: nothing it would
        see changes but its requests' caps, which only lower the drafts' expected tokens, and the held windows'
        observations: AR steps take nothing in but fade the counts of requests that have any (_fade), which raises
        their drafts' expected tokens and may bring a probe nearer (held through a fade, a probe came a window or two
        late: bench/results/2026-11-28-cpu-s28/NOTES.md), and their times, which move the cost table (held, they
        wait at most PRICE_WINDOWS windows, as a pricing served again ignores them). Why: a held AR window's budget calls
        took 55-90 us of host time before its model step on this CPU at 4-8 requests (cold after the step: ~20 us
        warm), against 16-21 us for an AR engine's whole scheduling, ~2 % of a 3.3-4.4 ms window (2026-11-26).

        A batch drafting on merit (_hold_drafting): the windows choose() would price as this one — its pricing served
        again (its batch, caps, cache length's bucket, estimates and calibration standing), no tree measurement near,
        no take-in due — so each of them is this draft, exactly."""
        self.hold_limits = (None, 0)
        if self._exploring is not None:  # a probe's observations are due: the window after them is priced anew
            return 0
        if self._last is not None and self._last.size > 1:
            return self._hold_drafting(steps, left, length)
        if self._probe_wait is None or self._pricing is None:
            return 0
        held_cost, probe_regret = self._probe_wait
        limit = min(self._pricing[1], LENGTH_STEP // steps)
        if left is not None:  # not every request's last token (choose() counts no window then)
            limit = min(limit, (max(left) - 2) // steps)
        limit = min(limit, self._windows_to_fade(self._pricing[0][0][0], steps))
        feeds, c = self.needs_context(steps), self.tree_clock
        clock, since_s, at_one, held_s, windows = c.windows, c.since_s, self._at_one, self._held_s, 0
        while windows < limit:  # each further window as choose() and needs_context() would count and see it
            clock += 1
            since_s += held_cost
            at_one += 1
            held_s += held_cost
            if (self.calibration.would_age(clock)  # (its factors fade: the pricing changes)
                    or not self._probe_waits(at_one, held_s, probe_regret)
                    or (self._tree_wait is not None  # a tree measurement's window
                        and self._tree_measures(clock, since_s, self._tree_wait[0]))
                    # the first that would feed the drafter
                    or (not feeds and (self._near_probe(at_one, held_s, steps)
                                       or self._tree_near(clock, since_s, steps)))):
                break
            windows += 1
        return windows

    def _windows_to_fade(self, requests: Sequence[Hashable], steps: int) -> int:
        """How many windows of `steps` AR steps may follow the one just chosen before choose() would see a fade
        (_fade): the observations of that window and of each held one add `steps` to the fading steps of every request
        of the batch with counts, and the window after the one whose observation reaches FADE_STEPS is priced on faded
        counts (a new estimate: its drafts' expected tokens rise back towards the curve's, so a probe's regret falls
        and it may come earlier). LENGTH_STEP (no limit) where no request of the batch has counts to fade."""
        fading = [self._fading.get(row, 0) for row in map(self._rows.get, requests) if self._fades(row)]
        if not fading:
            return LENGTH_STEP
        return max(-(-(FADE_STEPS - max(fading)) // steps) - 1, 0)

    def _hold_drafting(self, steps: int, left: Sequence[int] | None, length: int | None) -> int:
        """hold() of a drafting choice: the windows whose choice would serve this one's pricing again, each choosing the
        same draft (the priced best, priced after a window of it) with the same effects (held). While its uses last:
        no take-in comes (the held windows' steps, handed over at the hold's end, keep the kept steps below
        REFRESH_STEPS: choose() would see no new estimate) and the calibration does not fade (Calibration.age), every
        request keeps the block as its cap (at least block_size tokens left), the batch's longest cache stays in its
        LENGTH_STEP bucket (the scheduler checks these two: hold_limits), and no tree size's measurement window comes
        (on the tree clock as choose() moves it). Not after a measurement window (a burst's next window is one; after
        its last, choose() counts a window of the same draft as on merit). Only once the drafter's curve is measured
        (else every window takes in) and the window is calibrated (its drafter fed: _fed); every held window's
        observations are paired with the batch's expected tokens as choose() would pair them.

        Why: at batch 1 on this CPU (fixture pair, chain:8 windows of ~4.4 ms) auto's windows cost ~67 us more host
        time than a fixed draft's (0.127 against 0.060 ms mean between a window's model step and the next, 2026-11-27):
        choose, the cost table's and the estimates' bookkeeping, each cold after the model step."""
        pricing = self._pricing
        if (pricing is None or self._probing is not None or self._measuring or self._last != pricing[2][4]
                or pricing[0][3] != self._last
                or not self.curve.steps() or self._fed < TAP_LEAD
                or (left is not None and min(left) < self.block_size)):
            return 0
        limit = min(pricing[1], (REFRESH_STEPS - 1 - self._pending_steps) // steps)
        seconds = pricing[2][2][self._last]
        unmeasured = self._unmeasured()
        # a tree size's measurement window (_choose): the least regret of them comes first, on the clock as choose()
        # would move it
        regret = min((_regret(pricing[2], d) for d in self.drafts if d.tree and d.size in unmeasured), default=None)
        clock, since_s, windows = self.tree_clock.windows, self.tree_clock.since_s, 0
        while windows < limit:
            clock += 1
            since_s += seconds
            if (self.calibration.would_age(clock)
                    or (regret is not None and self._tree_measures(clock, since_s, regret))):
                break
            windows += 1
        if windows <= 0:
            return 0
        key = (pricing[0][0][0], self._last)  # (its requests, the draft): what choose() pairs a window's tokens with
        self._paired = (key, pricing[2][6][self._last])
        self.hold_limits = (None if length is None else (length // LENGTH_STEP + 1) * LENGTH_STEP,
                            0 if left is None else self.block_size)
        return windows

    def held(self, windows: int) -> None:
        """What choose() would have counted for `windows` held windows (hold) of the choice it made last: the tree
        clock, the pricing's use, and for an AR choice the AR stretch's windows and predicted time."""
        drafting, self._paired = self._paired is not None, None
        if windows <= 0:
            return
        if not drafting and self._probe_wait is None:
            raise ValueError("held() follows hold() of an AR choice held on merit")
        # what each held window adds to the clock, as choose() priced it: the drafting choice's priced seconds (its
        # pricing, served again), or the AR choice's
        seconds = self._pricing[2][2][self._last] if drafting else self._probe_wait[0]
        clock = self.tree_clock
        clock.windows += windows
        if not drafting:
            self._at_one += windows
        for _ in range(windows):  # (summed as choose() sums them)
            clock.since_s += seconds
            if not drafting:
                self._held_s += seconds
        if self._pricing is not None:
            self._pricing = (self._pricing[0], max(self._pricing[1] - windows, 0), self._pricing[2])

    def commit_ahead(self) -> Draft:
        """The draft choose_ahead just chose, made the next window's as choose() would make it (a scheduler that
        launches that window before the current one's read: its batch is the one choose_ahead chose for)."""
        ahead, self._ahead = self._ahead, None
        if ahead is None or ahead[2] != self._decision()[:-1]:
            raise ValueError("commit_ahead needs a choose_ahead call just before it")
        return self._take_ahead(ahead)

    def _take_ahead(self, ahead: tuple) -> Draft:
        self._set_decision(ahead[3])
        self._pricing, (self._tree_wait, self._probe_wait, self._curve_drafts) = ahead[4], ahead[5]
        return ahead[1]

    def _choose(self, requests: Sequence[Hashable], left: Sequence[int] | None, length: int | None) -> Draft:
        """choose() without the ahead choice."""
        clock = self.tree_clock
        burst, clock.burst, self._measuring = clock.burst, None, False
        if left is not None and max(left) <= 1:  # every request's last token: no draft emits more, AR costs least
            self._probing = None
            return Draft("chain", 1)
        clock.windows += 1
        self.calibration.age(clock.windows)
        self._probing = None
        priced = self._priced(requests, left, length)
        now, best, probe = priced[2], priced[4], priced[5]
        if best.size > 1 and not self.curve.steps():  # drafting pays at the prior, nothing measured yet: the
            return Draft("chain", self.block_size)  # largest chain measures every position (a batch AR suits waits)
        clock.since_s += now[best]
        # a measurement's burst goes on (paid for already) while the batch is one request (a batch that a request
        # joined, or the next one, is priced anew: replayed at batch 8, a burst planned at a batch's last request went
        # on in the next batch of 8, where a tree:16 window costs ~5 AR windows: 0.97 -> 0.94x the best fixed draft)
        if burst is not None and len(requests) == 1 and burst[0] in self._unmeasured():
            clock.burst = (burst[0], burst[1] - 1) if burst[1] > 1 else None
            self._measuring = True
            return Draft("tree", burst[0])
        # in an AR stretch a tree window is a probe as far as its cost goes: the drafter takes in the pending rows
        held = best.size == 1
        measuring = {}  # tree sizes not measured enough yet: their measurement window's regret
        for size in self._unmeasured():  # ... each takes a window in every tree_probe_every where exploring may lose it
            tree = Draft("tree", size)
            measuring[size] = _regret(priced, tree, self.cost.probe_factor if held else None)
            if self._tree_measures(clock.windows, clock.since_s, measuring[size]):
                # for one request, near the best choice (BURST_CHANCE), it runs up to TREE_BURST windows in a row: all
                # but the first unswitched, they teach its cost entry (CostTable.observe), and its steps cost a switch
                # per burst. Paid for from the exploration credit: the first window's regret now, the rest's as a debt
                # of the tree clock (the probe's credit is spent, as one credit, not indebted: the probes decide
                # between AR and chain:8 at batch 8 on this CPU; and a burst's whole regret up front let a probe, paid
                # window by window, come first every time and spend the credit). Not in an AR stretch, where the
                # tree's window is a probe (its cost is not its entry's); not for more requests: replayed at batch 8,
                # bursts at 2-7 requests (a window measures 2-7 steps) cost 0.97 -> 0.95x the best fixed draft (their
                # tree steps, bunched on a few texts, moved the estimates, and auto held AR more at 4-7 requests),
                # while one request is where a tree and a chain are a near tie (batch 1 on this CPU)
                left, rates = TREE_MEASURE_STEPS - self.tree_curves[size].tree.steps(), priced[3]
                near = not held and _chance(rates[tree] / rates[best], self.explore_spread) >= BURST_CHANCE
                burst = min(TREE_BURST, max(left, 1)) if near and len(requests) == 1 else 1
                clock.since_s, self._held_s = -(burst - 1) * measuring[size] / self.explore_share, 0.0
                clock.burst = (size, burst - 1) if burst > 1 else None
                self._measuring = True
                if held:
                    self._probing = tree  # its window teaches probe_factor, as a probe's does
                return tree
        if best.size > 1:  # drafting on merit: its windows refresh the estimates, as a probe's would; the backoff
            # stands (restarted here, a server whose load ends in a drain, where the last few requests draft on merit,
            # probed its full batch from every 4 windows again after each; in-process like the server, one scheduler
            # for 9 runs of 64 requests, interleaved: 0.957 / 0.978x AR at 8 / 16 requests against 0.948 / 0.973x
            # with the restart: within this CPU's noise, and the restart had no reason)
            self._at_one, self._held_s = 0, 0.0
            return best
        self._at_one += 1
        self._held_s += now[best]
        # a probe costs more than its table entry: the drafter takes in the context rows the AR windows left pending,
        # and runs cold (the table's probe_factor: what probes cost against their entries, learnt from their windows);
        # and it is worth what it may find: its regret counts over its chance of finding drafting ahead (_chance)
        rates = priced[3]
        probe_regret = (_regret(priced, probe, self.cost.probe_factor)
                        / _chance(rates[probe] / rates[best], self.explore_spread))
        if self._probe_waits(self._at_one, self._held_s, probe_regret):
            self._probe_wait = (now[best], probe_regret)  # (hold, needs_context)
            self._tree_wait = (min(measuring.values()), now[best]) if measuring else None  # (needs_context, hold)
            n = len(requests)
            self._curve_drafts = not self.defers_context(max(n - 1, 1), length)  # (needs_context)
            return best
        # probe: one window of the best drafting choice, so a drafter that became useful is noticed; each probe that
        # finds AR still best waits twice as long for the next
        self._at_one, self._held_s = 0, 0.0
        clock.since_s = 0.0  # (one exploration credit: a tree measurement's is spent too)
        self._probe_interval = min(2 * self._probe_interval, self.probe_every * MAX_PROBE_BACKOFF)
        self._probing = probe
        return probe

    def _unmeasured(self) -> list[int]:
        """The tree sizes not measured enough yet (fewer than TREE_MEASURE_STEPS steps; their counts only grow: once
        every size is, none are asked again)."""
        if self._measured_trees:
            return []
        sizes = [size for size in self.trees if self.tree_curves[size].tree.steps() < TREE_MEASURE_STEPS]
        self._measured_trees = not sizes
        return sizes

    def _priced(self, requests: Sequence[Hashable], left: Sequence[int] | None, length: int | None) -> tuple:
        """What the choice weighs for this batch: per draft its expected tokens (summed over the requests), its cost
        per step (the table's at this batch size and cache length) and as priced now (a switch's extra, below), the
        rate (tokens per second) priced so, the best draft, the best drafting one (the probe of an AR stretch), and
        the expected tokens before the calibration (what a chosen draft's window is paired with: Calibration).

        Reused for up to PRICE_WINDOWS windows while the batch (its requests and their caps), the estimates, the draft
        chosen last and the cache length to within LENGTH_STEP positions stand: the cost table moves a little every
        window (its drift and refinement), and pricing every draft anew every window cost ~30-40 us of Python and
        numpy after a model step — 1.5 % of an AR window at batch 8 on this CPU where auto held AR, ~1 % of a chain:8
        window at batch 1."""
        self.prepare()  # the estimates are what is priced: taken in first
        key = (self._batch_key(requests, left), self._prefixes[0], self.calibration.version, self._last,
               None if length is None else length // LENGTH_STEP)
        kept = self._pricing
        if kept is not None and kept[0] == key and kept[1] > 0:
            self._pricing = (key, kept[1] - 1, kept[2])
            return kept[2]
        n = len(requests)
        # the expected tokens stand while the batch, the estimates and the calibration do: a new cache length's
        # bucket (most of the misses at batch 1) or a switch prices only the costs anew
        if self._calibrated_e[0] != key[:3]:
            raw = self._expected_tokens(requests, left)
            bold = self._optimistic(self._pairs(requests, self._caps_of(requests, left)), raw)
            self._calibrated_e = (key[:3], self._calibrated(bold, n), raw)
        expected, raw = self._calibrated_e[1:]
        costs = dict(zip(self.drafts, self.cost.costs(n, self.drafts, length)))
        # a window after one of another draft costs its entry times that draft's switch factor (CostTable.observe),
        # once: the extra is spread over the SWITCH_HORIZON windows a new choice is taken to hold. Where switching is
        # dear, a near tie then no longer flips the choice every window (in-process at 4 requests on this CPU: auto
        # 0.96x AR flipping between AR and chain:8, 1.00x priced); priced whole on every window, it kept a batch on a
        # draft long after another was better (AR after drafting at 8 requests: 1.42x its entry, and auto drafted on
        # at 0.77x AR where AR was best)
        now = dict(costs)
        for d, factor in self.cost.switch.items():
            # a factor below 1 (switched windows cheaper than the entry) says the entry is high, which the drift and
            # the entry learn: no reason to switch (taken at its word, a tree entry 6 % high drew batch-1 windows to
            # tree:16 from chain:8)
            if factor > 1 and d != self._last and d in now:
                now[d] = costs[d] * (1 + (factor - 1) / SWITCH_HORIZON)
        rates = {d: expected[d] / now[d] for d in self.drafts}
        priced = (expected, costs, now, rates, _argmax(rates), _argmax({d: v for d, v in rates.items() if d.size > 1}),
                  raw)
        self._pricing = (key, PRICE_WINDOWS - 1, priced)
        return priced

    def choose_ahead(self, requests: Sequence[Hashable], left: Sequence[int] | None = None,
                     length: int | None = None, steps: int = 1) -> Draft:
        """Choose the next window's draft ahead (returned), for these requests after `steps` steps of the draft chosen
        last (the window the device runs now; `left`: the tokens each may emit before it, `length`: the batch's
        longest cache after it, at least): a scheduler on a GPU calls it while the device runs the current window, and
        either launches the next window with it at once (commit_ahead) or leaves it to the next choose(), which
        returns it if its batch is this one and nothing was chosen in between — else it chooses anew, as if this had
        not been called. On an H200's host choose() took ~50-230 us between two ~5 ms windows, where the
        device waits for it.

        What each request will have left is not known yet: it is guessed as its tokens left less `steps` times its
        expected τ under that draft (within what `steps` steps can emit), and the choice fits a batch whose requests
        have at least the guessed tokens left (a request that emitted less than expected: the choice was made for
        caps at most theirs, which only a request's last block has; and an AR choice for requests all guessed to be
        at their last token fits only if they are). Guessed as the fewest tokens they could have left (every step
        accepting all), the caps of a request's last ~steps x block tokens went below the block and no choice made
        ahead fitted them: 40 % of auto's windows at batch 1 on an H200, 81 % at batch 8 chose again on the critical
        path. The choice sees the estimates choose() would see then (the current window's steps are handed over after
        the next window is launched either way), but not the current window's time: the cost table lags a window
        more."""
        if left is not None:
            left = self._left_after(requests, left, steps)
        before, pricing = self._decision(), self._pricing
        draft = self.choose(requests, left, length)
        self._ahead = (self._batch_key(requests, left), draft, before[:-1], self._decision(), self._pricing,
                       (self._tree_wait, self._probe_wait, self._curve_drafts))
        self._set_decision(before)
        self._pricing = pricing
        return draft

    def _calibrated(self, expected: dict[Draft, float], n: int) -> dict[Draft, float]:
        """A batch of n requests' expected tokens per draft with each draft's drafted tokens (all but the one token a
        step emits per request) scaled by its calibration factor."""
        factors = self.calibration.factors(self.drafts)
        return {d: e if d.size < 2 else n + factors[d] * (e - n) for d, e in expected.items()}

    def _left_after(self, requests: Sequence[Hashable], left: Sequence[int], steps: int) -> list[int]:
        """Each request's tokens left after `steps` steps of the last chosen draft, as expected (see choose_ahead)."""
        draft = self._last if self._last is not None else Draft("chain", 1)
        i, deepest = self.drafts.index(draft) if draft in self.drafts else None, draft.max_tau(self.block_size)
        self._expected_tokens(requests, left)  # fills the (row, cap) cache read below
        cache, guessed = self._row_e[1], []
        for r, x, cap in zip(requests, left, self._caps(left)):
            e = 1.0 if i is None else cache[(self._rows.get(r, 0), cap)][i]
            guessed.append(min(x - steps, max(x - steps * deepest, x - round(steps * e))))
        return guessed

    def _caps(self, left: Sequence[int]) -> tuple[int, ...]:
        """Each request's cap on a step's τ: the tokens it has left, within 1..block_size."""
        b = self.block_size
        return tuple([max(1, min(x, b)) for x in left])

    def _batch_key(self, requests: Sequence[Hashable], left: Sequence[int] | None) -> tuple:
        return tuple(requests), None if left is None else self._caps(left)

    def _fits(self, key: tuple, requests: Sequence[Hashable], left: Sequence[int] | None) -> bool:
        """Whether a choice made ahead for `key` (requests, guessed caps) fits this batch: the same requests, each with
        at least its guessed cap; a choice for every request at its last token only where they are (see
        choose_ahead)."""
        now = self._batch_key(requests, left)
        if key[0] != now[0] or (key[1] is None) != (now[1] is None):
            return False
        if key[1] is None:
            return True
        return all(c >= g for c, g in zip(now[1], key[1])) and (max(key[1]) > 1 or max(now[1]) <= 1)

    def _decision(self) -> tuple:
        """What choose() changes besides its caches: the tree clock, the AR stretch's probe counters, the draft it
        chose and, last, whether the window it chose is a probe (observe_time reads and clears that between two
        choices)."""
        c = self.tree_clock
        return (c.windows, c.since_s, c.burst, self._at_one, self._probe_interval, self._held_s, self._last,
                self._measuring, self._probing)

    def _set_decision(self, state: tuple) -> None:
        c = self.tree_clock
        (c.windows, c.since_s, c.burst, self._at_one, self._probe_interval, self._held_s, self._last,
         self._measuring, self._probing) = state

    def prepare(self, now: bool = False, tables: bool = True) -> None:
        """Take the kept observations in once they hold REFRESH_STEPS steps or a probe's (observe_window), or nothing
        was measured yet, or `now`
        (a scheduler whose device runs the window meanwhile, where taking them in costs the window nothing), and
        bring the E-by-depth tables up to date with what was taken in: per row of counts (row 0: a request not
        observed yet, the global curve), E[τ] of its chain and of each tree size at every cap — every request at once
        (numpy: ~40 us for 1-64 requests, where a loop per request and depth took 0.1-0.2 ms at 8-16 requests, 2-4 %
        of a 5 ms window of the device loop on an H200). choose() calls it; a scheduler calls it while the device
        runs the window, so that choose() only looks rows up. Not the tables where no window follows (`tables`
        False: a batch's end, where the budget may be dropped with its scheduler; the next choice makes them, the
        same): ~150 us a request at batch 1 on this CPU, for a budget per generate call."""
        if self._pending and (now or self._pending_steps >= REFRESH_STEPS or self._explored or not self.curve.steps()):
            self._take_in()
        if tables:
            self._prepare_tables()

    def _prepare_tables(self) -> None:
        """prepare()'s tables, for what is taken in now."""
        key = (self._forgotten, self._faded, self.curve.version, len(self._counts))
        if self._prefixes[0] != key:
            g, misses = self._estimates()
            # no request has counts of its own (each new budget until its first take-in): every row is the curve's,
            # which the shared tables hold (_rows_expected); else row 0 (zeros) is the curve's, for them
            tables = self._depth_tables(_requests_shrunk(g, self._counts), misses) if self._rows else None
            if tables is not None and self.tables.depth is None:
                self.tables.depth = tables[0]
            self._prefixes = (key, tables)

    def _expected_tokens(self, requests: Sequence[Hashable], left: Sequence[int] | None = None) -> dict[Draft, float]:
        """Per draft, the batch's expected tokens of a step: sum over the requests of E_r(draft), each capped by the
        tokens it has left: the requests' rows of the prepared tables, at their caps."""
        caps = self._caps_of(requests, left)
        self.prepare()
        version = self._prefixes[0]
        key = (tuple(requests), caps, version)
        if self._expected[0] == key:
            return self._expected[1]
        # per (row, cap), E of every draft as floats, kept while the tables stand: a batch changes a request or a cap
        # at a time (each request's last block), and numpy's per-call cost after a model step (~3x its cost warm)
        # had made this ~30 % of choose() at batch 8 on this CPU
        pairs = self._pairs(requests, caps)
        cache = self._rows_expected(pairs)
        expected = dict(zip(self.drafts, map(sum, zip(*(cache[p] for p in pairs)))))
        self._expected = (key, expected)
        return expected

    def _caps_of(self, requests: Sequence[Hashable], left: Sequence[int] | None) -> tuple[int, ...]:
        """Each request's cap on τ (_caps; the block for every request where `left` is None)."""
        return (self.block_size,) * len(requests) if left is None else self._caps(left)

    def _pairs(self, requests: Sequence[Hashable], caps: Sequence[int]) -> list[tuple[int, int]]:
        """Each request's (row of counts, cap): where its E per draft is looked up (_rows_expected)."""
        return [(self._rows.get(r, 0), cap) for r, cap in zip(requests, caps)]

    def _rows_expected(self, pairs: Sequence[tuple[int, int]]) -> dict:
        """The (row, cap) -> E of every draft cache of the prepared tables, with these pairs in it."""
        version = self._prefixes[0]
        if self._row_e[0] != version:
            self._row_e = (version, {})
        cache = self._row_e[1]
        missing = list(dict.fromkeys(p for p in pairs if p not in cache))
        if not missing:
            return cache
        own = [p for p in missing if p[0]]  # requests with counts of their own
        if own:  # one numpy call for all of them (each call costs ~10-20 us on an H200's host)
            rows, at = zip(*own)
            cache.update(zip(own, self._at_caps(self._prefixes[1][list(rows)], at).tolist()))
        if len(own) < len(missing):  # row 0, the curve's: the shared tables' (the same numbers a row of zeros gives)
            g, misses = self._estimates()  # (made for this budget's inputs, if another's were made since)
            t = self.tables
            if t.depth is None:
                t.depth = self._depth_tables(g[None], misses)[0]
            for p in missing:
                if not p[0]:
                    e = t.at_cap.get(p[1])
                    if e is None:
                        e = t.at_cap[p[1]] = self._at_caps(t.depth[None], [p[1]])[0].tolist()
                    cache[p] = e
        return cache

    def _depth_tables(self, chains: np.ndarray, misses: dict[int, np.ndarray]) -> np.ndarray:
        """[request, table, τ cap]: E[τ] of the request's chain (table 0) and of each tree size (1, 2, ...) when the
        step may accept at most cap - 1 drafts, from the requests' chain curves (rows) and the trees' miss factors."""
        curves = [chains] + [_treed(chains, misses[size]) for size in self._sizes]
        return _expected_by_depth(np.stack(curves, axis=1))  # [request, table, depth] -> [request, table, cap]

    def _at_caps(self, tables: np.ndarray, caps: Sequence[int]) -> np.ndarray:
        """[request, draft]: E_r(draft) at each request's cap. A tree's E is at least a smaller tree's: best-first
        trees nest (the N best paths hold the M < N best, spec/tree.py), so every step a larger tree accepts at least
        as much — an estimate that says otherwise is raised to the smaller one's."""
        columns = np.minimum(self._depth[None, :], np.asarray(caps)[:, None])
        rows = np.arange(tables.shape[0])[:, None]
        e = tables[rows, self._source[None, :], columns]
        e[:, self._tree_columns] = np.maximum.accumulate(e[:, self._tree_columns], axis=1)
        return e

    def needs_context(self, steps: int = 1) -> bool:
        """Whether the AR window just chosen (windows of `steps` steps) should feed the drafter's context (its steps'
        tap features pending, spec/step.py DEFERRED_CONTEXT). Not where the batch is held at AR with no drafting window
        in sight: neither its next probe nor a window that could measure a tree size (_tree_near) within TAP_LEAD
        steps, and one request fewer would be held at AR too (defers_context: at the drafter's curve over every
        request; a batch of one: it would). Such a window is a plain AR step (no taps, no context rows: what an engine
        without a drafter runs); the drafter's context restarts where the AR windows feed it again, TAP_LEAD steps
        before the probe (on the fixture pair a drafter that sees the last 64 positions accepts within 1 % of one that
        sees them all).

        A drafting window that comes after plain ones with no feed between sees no context before it: at 4 requests
        on this CPU, where a request's end makes the 3 left draft, such windows accepted τ 1.8-2.7 against 3.0-3.2
        fed — hence the request fewer. At one request likewise: where the curve would draft, an AR window is the
        request's own estimate after a few rejected drafts, which fades back within a few windows (_fade); as a plain
        window it restarted the drafter's context, the drafting windows after it accepted p1 0.70 against 0.80 fed,
        their rejections held the request at AR again, and so on: batch-1 runs with such windows ran 112-948 AR steps,
        0.900-0.959x the best fixed draft; fed, 10 of 10 paired runs 0.976-0.995 against 0.900-0.986 (means 0.984
        against 0.962; bench/results/2026-11-28-cpu-s23). Measured in-process like the server at 16 requests on this
        CPU (2026-11-26, 8 runs interleaved): AR windows that feed the drafter took ~2 % more per run than plain ones
        (taps, context rows); the budget's own work is ~35 us per window at 16 requests (~0.7 %)."""
        if self._last is None or self._last.size > 1 or self._probing is not None:  # (trees: 2+ nodes)
            return True
        c = self.tree_clock
        feeds = (self._curve_drafts or self._near_probe(self._at_one, self._held_s, steps)
                 or self._tree_near(c.windows, c.since_s, steps))
        if not feeds:  # a plain AR window: the drafter's context restarts after it (see _fed)
            self._fed = 0
        return feeds

    def _tree_measures(self, windows: int, since_s: float, regret: float) -> bool:
        """Whether window `windows` of the tree clock measures a tree size not measured enough yet whose window would
        lose `regret` (_choose): one window in every tree_probe_every, where explore_share of the predicted seconds
        since the last measurement (`since_s`) covers that regret."""
        return windows % self.tree_probe_every == 0 and self.explore_share * since_s >= regret

    def _tree_near(self, windows: int, since_s: float, steps: int) -> bool:
        """Whether a held batch's window `windows` of the tree clock (`since_s`: its predicted seconds since the last
        tree measurement; windows of `steps` steps) is within TAP_LEAD steps of a window that could measure a tree size
        (_tree_measures, at the AR choice's price). Fed only there: a tree size that is never worth its window at this
        batch (at 16 requests its window costs 10-15 AR windows on this CPU) had kept every held AR window feeding the
        drafter, taps and context rows for nothing."""
        if self._tree_wait is None:
            return False
        regret, seconds = self._tree_wait
        reach = TAP_LEAD // steps
        j = reach - (windows + reach) % self.tree_probe_every  # the last measurement window within reach
        return j >= 1 and self._tree_measures(windows + j, since_s + j * seconds, regret)

    def _near_probe(self, at_one: int, held_s: float, steps: int) -> bool:
        """Whether a batch held at AR for `at_one` windows (`held_s`: their predicted seconds; windows of `steps` steps)
        is within TAP_LEAD steps of its probe: of the window where _probe_waits lets it come (the backoff's interval
        reached and explore_share of the time held covering the probe's regret), each further window priced at the
        held choice's cost. With the interval alone, a probe that waited for the share (a dear probe in
        a big batch: at 8 requests through the server on this CPU, a chain:8 probe lost ~5 AR windows, so it waited
        ~250) kept every window from the interval on feeding the drafter: 85 % of a batch of 8's AR windows fed, 2 %
        dearer each, for one probe's context (2026-11-27)."""
        reach = TAP_LEAD // steps  # (both conditions only come nearer with each window: the last within reach decides)
        if self._probe_wait is None:
            return at_one + reach >= self._probe_interval
        seconds, regret = self._probe_wait
        return not self._probe_waits(at_one + reach, held_s + reach * seconds, regret)

    def _probe_waits(self, at_one: int, held_s: float, regret: float) -> bool:
        """Whether a batch held at AR for `at_one` windows in a row (`held_s`: their predicted seconds) waits for its
        probe: the backoff's interval is not reached, or explore_share of the time waited does not cover the probe's
        regret."""
        return at_one < self._probe_interval or self.explore_share * held_s < regret

    def defers_context(self, n: int, length: int | None = None) -> bool:
        """Whether requests joining a batch of n should leave their prompt out of the drafter (spec/step.py prefill:
        only its last rows wait, pending, for the drafter's next draft): at the drafter's curve over every request (the
        prior until measured), AR is the best choice for n requests — so their prompt would likely be taken in for
        nothing (on the fixture pair the intake costs 10-12 % of a prefill; on Qwen3-8B with a 5-layer drafter ~1.6 %)."""
        version = (self.curve.version, self.calibration.version)
        if self._defers[0] != version:  # n requests at the global curve: n times one request's rates
            # the prepared tables' row 0 (a request with no counts: the global curve) at the block's cap, as
            # _expected_tokens reads it: the tables the next choice prices from (made apart, ~150 us a prefill at
            # batch 1 on this CPU)
            self._prepare_tables()
            pair = (0, self.block_size)
            row = dict(zip(self.drafts, self._rows_expected([pair])[pair]))
            self._defers = (version, self._calibrated(self._optimistic([pair], row), 1))
        expected = self._defers[1]
        costs = self.cost.costs(n, self.drafts, length)
        return _argmax({d: expected[d] / c for d, c in zip(self.drafts, costs)}).size == 1

    def observe(self, request_id: Hashable, draft: Draft, taus: Sequence[int],
                chain_equivalent: Sequence[tuple[int, int]] = ()) -> None:
        """One request's steps of a window, taken in at once: observe_window for one request, then prepare()'s
        taking in."""
        self.observe_window([request_id], draft, [taus], [chain_equivalent])
        if self._pending:
            self._take_in()

    def observe_window(self, requests: Sequence[Hashable], draft: Draft, taus: Sequence[Sequence[int]],
                       chain_equivalent: Sequence[Sequence[tuple[int, int]]] = (),
                       finished: Sequence[bool] = ()) -> None:
        """A window's steps, per request: τ per step; for a tree, also (K, τ) of its argmax chain per step (what a
        chain would have verified and accepted on the same step), so the chain estimate keeps learning while trees run
        and a tree is compared with the chain on the same text, not on the text it happened to be chosen for; and
        whether the request finished in the window: its last step stopped at a stop token or its budget, which cut
        τ there — it counts as a step that could accept no more (else every finished request would count a rejection
        its drafter never made, at the depth where its text ended). Kept
        until prepare() takes them in (every REFRESH_STEPS steps: with one-step windows, numpy's per-call cost per
        window had made auto's windows ~5 % dearer on this CPU at batch 1; every 16 steps instead of 4: auto 2-3 %
        faster in-process at batch 1, level at batch 8, and replayed on traces its choices lose nothing to the lag) —
        but a probe's, or a tree measurement's in an AR stretch, at the next prepare(): its steps are what it ran for,
        and the AR windows after it add none (kept, a probe's one step waited for 15 more probes: a replayed server at
        concurrency 8 ran AR on its first steps' curve for ~250 windows; auto / the best fixed 0.939 -> 0.968 with
        this. Taking in every drafted step an AR window follows instead reached 0.978 there, but static batches of 8
        and 16 lost ~1 %: their first steps' curve is low, and the lag had kept it out of the drain's choices)."""
        if draft.size < 2:
            self._fade(requests, taus)
            return
        requests, taus = tuple(requests), [list(t) for t in taus]  # (kept: the caller's lists may change)
        if self._exploring == (requests, draft):
            self._exploring, self._explored = None, True
        expected = self._chosen.pop((requests, draft), None) if self._chosen else None  # (calibrated at the take-in)
        if expected is None and self._paired is not None and self._paired[0] == (requests, draft):
            expected = self._paired[1]  # a held window's, handed over at its hold's end (hold)
        # kept, read at the take-in (_count_steps): a chain's steps are its τs
        chains = [list(c) for c in chain_equivalent] if draft.tree else None
        self._pending.append((requests, draft, taus, chains, list(finished), expected))
        steps = max(map(len, taus if chains is None else chains), default=0)
        self._pending_steps += steps
        self._fed += steps

    def _fade(self, requests: Sequence[Hashable], taus: Sequence[Sequence[int]]) -> None:
        """AR steps fade the counts of the requests that have any by REQUEST_DECAY per step, as drafted steps do: the
        text has moved on since they were counted. Without it a request whose estimate fell in a hard passage (a few
        rejected drafts) kept it through every AR window — they count nothing — until a probe, which its pessimistic
        estimate priced dear: at batch 1 on this CPU (2026-11-26, 40 prompts) 1-189 of ~900 windows were AR in a run,
        0-20 faded, and auto / the best fixed draft went from 0.952 to 0.966 (means of ten alternating pairs of
        scripts/bench_draft_budget.py runs; batch 8 and server-like replays level). Counts that fade
        below FADED trials are cleared (the estimate is then the global one), so a batch held at AR stops paying for
        the estimates' refresh once its requests' counts are gone; and the steps are applied FADE_STEPS at a time
        (each application prices the batch anew: ~0.1 ms after an AR window at batch 8 on this CPU). Not at the next
        take-in: AR windows add no drafted steps to take in."""
        fading = self._fading
        for r, t in zip(requests, taus):
            row = self._rows.get(r)
            if t and self._fades(row):
                fading[row] = fading.get(row, 0) + len(t)
        if not fading or max(fading.values()) < FADE_STEPS:
            return
        rows = list(fading)
        faded = self._counts[rows] * (REQUEST_DECAY ** np.array([fading[row] for row in rows]))[:, None, None]
        faded[faded[:, 1, 0] < FADED] = 0.0
        self._counts[rows] = faded
        fading.clear()
        self._faded += 1

    def _fades(self, row: int | None) -> bool:
        """Whether AR steps fade this row's counts (_fade): a request observed, with counts left."""
        return row is not None and self._counts[row, 1, 0] > 0

    def _take_in(self) -> None:
        """The kept windows' steps, every request's at once (numpy): the calibration's pairs, the drafter's curve, each
        request's decayed counts (its steps in order), the trees' paired counts; then the rows of the requests that
        ended meanwhile are freed."""
        self._explored = False
        self._count_steps()
        ending, self._ending = self._ending, set()
        for request_id in ending:
            self._free_row(request_id)

    def _count_steps(self) -> None:
        per_request: dict = {}  # request -> its chain steps (K, τ), oldest first
        trees: dict = {}  # tree size -> (its steps' τ, their argmax chains' (K, τ))
        calibrating = []  # (draft, drafted tokens accepted, expected) of the windows a choice paired (choose)
        for requests, draft, taus, chains, finished, expected in self._pending:
            if expected is not None and not any(finished) and all(taus):  # (a finished request's steps were cut)
                n = len(requests)
                accepted = sum(sum(t) / len(t) for t in taus)  # per step, summed over the requests as expected is
                calibrating.append((draft, accepted - n, expected - n))
            # per request its steps (K, τ): a chain's K is its size, a tree's steps count its argmax chain's
            if chains is None:
                chains = [[(draft.size, t) for t in r_taus] for r_taus in taus]
            for c, r_taus, done in zip(chains, taus, finished):
                if done and c:  # its last step: as deep as what it emitted (its chain's τ is cut there too)
                    c[-1] = (_as_emitted(c[-1][0], r_taus[-1]), c[-1][1])
            for r, c in zip(requests, chains):
                if c:
                    per_request.setdefault(r, []).extend(c)
            if draft.tree:
                tree_taus, tree_chains = trees.setdefault(draft.size, ([], []))
                for r_taus, c in zip(taus, chains):
                    tree_taus.extend(r_taus[: len(c)])
                    tree_chains.extend(c)
        self._pending, self._pending_steps = [], 0
        if calibrating:
            self.calibration.add(calibrating)
        if not per_request:
            return
        width = self.block_size  # depths 0..B-1 (_stop)
        every = [[0] * width, [0] * width]  # the drafter's curve: every step once
        decayed = []  # per request: its steps, a request's counts fade by REQUEST_DECAY per step (oldest first)
        for c in per_request.values():
            stops, m = [[0.0] * width, [0.0] * width], len(c)
            for i, (k, t) in enumerate(c):
                _stop(every, k, t, 1)
                _stop(stops, k, t, REQUEST_DECAY ** (m - 1 - i))
            decayed.append(stops)
        reached = _reached(np.array([every] + decayed, dtype=float))  # [the curve, then the requests, 2, position]
        self.curve.add_counts(reached[0, 0], reached[0, 1])
        rows = [self._row_of(r) for r in per_request]
        # AR steps not yet applied (_fade) fade the counts too, as if they came before these (they interleave: close)
        fade = np.array([REQUEST_DECAY ** (len(c) + self._fading.pop(row, 0))
                         for c, row in zip(per_request.values(), rows)])
        self._counts[rows] = self._counts[rows] * fade[:, None, None] + reached[1:]
        for size, (tree_taus, tree_chains) in trees.items():
            # the tree and its argmax chain counted on the same steps at the same depths: those the step verified the
            # chain at (in the tree, and the one past it where the path reached there: spec/tree.chain_equivalent;
            # without it, the chain's and the tree's deep acceptance came out high, and tree:16's estimate 5.5 % above
            # what it accepted while it ran, in a batch-1 replay of 40 prompts). Counting the tree at every depth while
            # its chain is known only as deep as it lies in the tree compared deep depths on different steps (the
            # chain's: those where the drafter was sure enough to grow it deep), so the tree looked worse than its
            # chain there: replayed with an H200's costs at batch 16 (4-step windows), tree:16's E[τ] came out 5 % low
            # and chain:16 was chosen over it, 0.960x the best fixed (0.987x counted thus)
            paired = self.tree_curves[size]
            ks = [k for k, _ in tree_chains]
            paired.tree.add(ks, tree_taus)
            paired.chain.add(ks, [t for _, t in tree_chains])

    def observe_time(self, n: int, draft: Draft, seconds_per_step: float, length: int | None = None) -> None:
        """A window's seconds per step, for n requests whose longest cache held `length` positions when it started (the
        windows in order: one of another draft than the window observed before it teaches that draft's switch
        factor; a probe's, the probe factor)."""
        switched, self._observed = self._observed is not None and self._observed != draft, draft
        probe = self._probing == draft
        if probe:
            self.cost.observe_probe(n, draft, seconds_per_step, length)
        self._probing = None
        self.cost.observe(n, draft, seconds_per_step, length, switched=switched and not probe, probe=probe)

    def _row_of(self, request_id: Hashable) -> int:
        row = self._rows.get(request_id)
        if row is None:
            if not self._free_rows:  # twice the rows (the new ones zero)
                grown = len(self._counts)
                self._counts = np.concatenate([self._counts, np.zeros_like(self._counts)])
                self._free_rows = list(range(2 * grown - 1, grown - 1, -1))
            row = self._rows[request_id] = self._free_rows.pop()
        return row

    def forget(self, request_id: Hashable) -> None:
        """A request that ended: its row of counts is freed — once its kept steps are taken in (they still count for
        the drafter's curve), at the next take-in, instead of a take-in now (~0.15-0.25 ms at every request's end on
        this CPU, twice: at its finish and after its last window's observations)."""
        if self._pending:
            self._ending.add(request_id)
            return
        self._free_row(request_id)

    def _free_row(self, request_id: Hashable) -> None:
        row = self._rows.pop(request_id, None)  # an id used again is a new request
        if row is not None:
            self._forgotten += 1
            self._counts[row] = 0.0
            self._fading.pop(row, None)
            self._free_rows.append(row)

    def describe(self) -> str:
        return "auto"


def _regret(priced: tuple, d: Draft, factor: float | None = None) -> float:
    """What a window of d loses against the best choice of a pricing (AutoBudget._priced): its time (its entry times
    `factor`, else as priced now) beyond what the best takes for the tokens d is expected to emit."""
    expected, costs, now, rates, best = priced[:5]
    return (now[d] if factor is None else costs[d] * factor) - expected[d] / rates[best]


def _chance(ratio: float, spread: float) -> float:
    """A probe's chance of finding drafting ahead of AR, relative to a tie's: the batch's best drafting rate, priced
    at `ratio` times AR's, taken to lie log-normally around its price with log-spread `spread`: 2 P(rate > AR's) =
    2 Phi(ln(ratio) / spread), 1 at a tie (and above); at spread 0.5, 0.83 at 0.9x, 0.58 at 0.76x, 0.17 at 0.5x.
    AutoBudget._choose divides a probe's regret by it: exploration is worth what it may find, so a probe far from a tie
    waits that much longer for explore_share of the time held to cover it, and one near a tie comes about as before.

    Why: where drafting is far behind AR (16 requests on this CPU: chain:8's windows cost 5-6 AR windows, τ ~3.5;
    probes priced at ~0.76x AR's rate ran at 0.45-0.6x) the probes found it behind every time and lost ~3 % of the
    decode; lowering explore_share for every batch (s24's share backoff) saved that but cost batch 8, where chain:8 and
    AR are a near tie and the probes decide which is chosen. Measured (bench/results/2026-11-28-cpu-s27/NOTES.md):
    spread 0.5 — in-process at 16 requests auto / AR 0.949 -> 0.974, better in 6 of 6 pairs (2.7 probes a run against
    4.5); the standard bench's batch 8 auto / AR 1.029 -> 1.052 and batch 1 0.960 -> 0.974 (6 pairs each). Spread
    0.25 (0.67 at 0.9x, 0.27 at 0.76x) gained about as much at 16 but cost batch 8 (auto / AR 0.990 over 3 runs
    against 1.049 over 7): it cut the probes at the near ties too. The priced ratio has been off by 0.3-0.5 in log at
    16 requests and by -0.3..+0.05 at 8 (s26: chain:8 / AR priced 3.72x, ran 3.89x and 2.69x).

    Not a tree size's measurement window: an unmeasured tree is priced as its argmax chain (its miss factor 1), a
    floor under what it may accept, not an estimate of it, and its measurement is a one-time cost (spread inf: 1
    everywhere, the rule before)."""
    if ratio >= 1:
        return 1.0
    return max(1.0 + math.erf(math.log(max(ratio, 1e-12)) / (spread * math.sqrt(2.0))), 1e-12)


def _argmax(rates: dict[Draft, float]) -> Draft:
    """The best rate; on a tie (within rounding) the one listed first (chains by K, then trees), except between two
    trees: the larger (best-first trees nest: at an equal rate its true expected tokens are at least the smaller's)."""
    best, best_rate = None, -1.0
    for d, rate in rates.items():
        if rate > best_rate * (1 + 1e-9) or (d.tree and best.tree and rate >= best_rate * (1 - 1e-9)):
            best, best_rate = d, rate
    return best


def _expected_by_depth(p: np.ndarray) -> np.ndarray:
    """[..., E[τ] for K = 0 (unused), 1, ..., len(p) + 1]: E[τ] of a step that can accept up to K - 1 drafts, for
    every K at once (1 + the running sum of the running product of p), along the last axis."""
    out = np.empty(p.shape[:-1] + (p.shape[-1] + 2,))
    out[..., :2] = 1.0
    np.cumsum(np.cumprod(p, axis=-1), axis=-1, out=out[..., 2:])
    out[..., 2:] += 1.0
    return out


def _treed(p: np.ndarray, miss: np.ndarray, most: float = MAX_ACCEPTANCE) -> np.ndarray:
    """A tree's curve from a chain curve: the chain's rejection rate times the tree's miss factor, kept within
    [0, most]."""
    return np.minimum(np.maximum(1 - (1 - p) * miss, 0.0), most)  # (np.clip: a Python wrapper's calls more)


def _shrink(toward, accepted: np.ndarray, trials: np.ndarray, weight: float) -> np.ndarray:
    """Per position (the last axis): (weight * toward + accepted) / (weight + trials)."""
    return (weight * np.asarray(toward, dtype=float) + accepted) / (weight + trials)


def _requests_shrunk(g: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Requests' chain curves (rows): their decayed counts [request, (accepted, trials), position] shrunk toward the
    global curve g."""
    return _shrink(g, counts[:, 0], counts[:, 1], REQUEST_WEIGHT)
