"""Run a script (a replay, or lockcount.py on the engine) with a budget variant patched in:
`python variant.py VARIANT script args...`. Variants (none kept; NOTES.md section 4): base (none), nocal (every
calibration factor 1), chaincal (one factor for chains and trees), treechain (a tree window's argmax chains calibrate
the chains, at the depth each lies in the tree), treechain_nt (that, with one factor), decayR (the drafter's curve
fades by R per step), globaldecay (every kind's calibration sums fade with every calibrated window), depth1 (a tree
window's argmax chains calibrate the chains at depth 1 only), refreshN (while a tree is chosen on merit, the best
chain gets a window once chains have not run for N windows and the exploration credit covers its regret)."""
import sys, runpy
import dflash_trt.spec.budget as B
v = sys.argv.pop(1)
if v == 'nocal':
    B.Calibration.factor = lambda self, d: 1.0
elif v == 'chaincal':  # the chain's factor for trees too
    B.Calibration._key = staticmethod(lambda d: "chain")
if v in ('treechain', 'treechain_nt'):  # a tree window on merit also calibrates the chains: its argmax chain's steps
    orig = B.AutoBudget._count_steps
    deepest = None
    def count(self):
        extra = []
        i = [j for j, d in enumerate(self.drafts) if not d.tree][-1]  # the block's chain: E at cap K = chain:K's
        for requests, draft, taus, chains, finished, expected in self._pending:
            if expected is None or not draft.tree or any(finished) or not all(taus) or not chains:
                continue
            acc = exp = 0.0
            for r, c in zip(requests, chains):
                if not c:
                    continue
                row = self._rows.get(r, 0)
                e = self._rows_expected([(row, k) for k, _ in c])
                acc += sum(t - 1 for _, t in c) / len(c)
                exp += sum(e[(row, k)][i] - 1 for k, _ in c) / len(c)
            extra.append((B.Draft("chain", 16), acc, exp))
        orig(self)
        if extra:
            self.calibration.add(extra)
    B.AutoBudget._count_steps = count
    if v == 'treechain_nt':
        B.Calibration._key = staticmethod(lambda d: "chain")
if v.startswith('decay'):  # the drafter's curve fades per step (recency)
    rate = float(v[5:])
    oc = B.AutoBudget._count_steps
    def count(self):
        steps = sum(max(map(len, taus if chains is None else chains), default=0) * len(requests)
                    for requests, draft, taus, chains, finished, expected in self._pending)
        f = rate ** steps
        self.curve.accepted = self.curve.accepted * f
        self.curve.trials = self.curve.trials * f
        oc(self)
    B.AutoBudget._count_steps = count
if v == 'globaldecay':  # every kind's calibration sums fade with every calibrated window, of any kind
    def add(self, windows):
        for d, accepted, expected in windows:
            for key, sums in self.sums.items():
                if key != self._key(d):
                    sums[0] *= B.CALIBRATION_DECAY
                    sums[1] *= B.CALIBRATION_DECAY
            sums = self.sums.setdefault(self._key(d), [0.0, 0.0])
            sums[0] = B.CALIBRATION_DECAY * sums[0] + accepted
            sums[1] = B.CALIBRATION_DECAY * sums[1] + expected
        self.version += 1
    B.Calibration.add = add
if v == 'depth1':  # a tree window's argmax chains calibrate the chains at depth 1 only (every tree holds it)
    orig1 = B.AutoBudget._count_steps
    def count1(self):
        extra = []
        for requests, draft, taus, chains, finished, expected in self._pending:
            if expected is None or not draft.tree or any(finished) or not all(taus) or not chains or not all(chains):
                continue
            g, _ = self._estimates()
            p1 = self._chain_curves(list(requests), g)[:, 0]
            acc = sum(sum(t >= 2 for _, t in c) / len(c) for c in chains)
            extra.append((B.Draft("chain", self.block_size), float(acc), float(p1.sum())))
        orig1(self)
        if extra:
            self.calibration.add(extra)
    B.AutoBudget._count_steps = count1
if v.startswith('refresh'):  # while a tree is chosen on merit, the best chain gets a window once the chains have run
    # none for STALE windows and the exploration credit covers its regret (calibrated: its factor follows the text)
    stale = int(v[7:])
    orig_c = B.AutoBudget._choose
    def choose_r(self, requests, left, length):
        d = orig_c(self, requests, left, length)
        clock, pr = self.tree_clock, self._pricing
        gap = getattr(clock, 'chain_gap', 0)
        if d.tree and pr is not None and d == pr[2][4] and self._probing is None and gap >= stale:
            expected, costs, now, rates, best = pr[2][:5]
            bc = max((c for c in self.drafts if not c.tree and c.size > 1), key=lambda c: rates[c])
            if self.explore_share * clock.since_s >= now[bc] - expected[bc] / rates[best]:
                clock.since_s, clock.chain_gap = 0.0, 0
                return bc
        clock.chain_gap = 0 if (not d.tree and d.size > 1) else gap + 1
        return d
    B.AutoBudget._choose = choose_r
script = sys.argv.pop(1)
sys.argv[0] = script
runpy.run_path(script, run_name='__main__')
