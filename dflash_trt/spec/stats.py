"""Acceptance statistics. τ (acceptance length) counts the bonus token: 1 <= τ <= K for K verified slots."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Stats:
    # K: slots verified per step (1 = plain AR), the largest τ a step can have; with a draft budget that varies K, the
    # largest; for a draft tree of N nodes, its depth + 1 (ks then records N, the tokens each step verified)
    verify_len: int = 1
    taus: list[int] = field(default_factory=list)  # one per decode step of one sequence
    ks: list[int] = field(default_factory=list)  # K of each step (when recorded: the draft budget may vary it)
    # steps by the draft they verified ("chain:K", "tree:N"; "chain:1" = an AR step), where recorded (the torch
    # engine's scheduler: what a budget such as auto chose, request by request)
    draft_steps: dict[str, int] = field(default_factory=dict)
    new_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0

    @property
    def steps(self) -> int:
        return len(self.taus)

    @property
    def mean_tau(self) -> float:
        return sum(self.taus) / len(self.taus) if self.taus else 0.0

    @property
    def histogram(self) -> list[int]:
        """histogram[t - 1] = number of steps with τ = t, t in 1..K."""
        counts = [0] * self.verify_len
        for t in self.taus:
            counts[t - 1] += 1
        return counts

    @property
    def per_position_acceptance(self) -> list[float]:
        """[k - 1] = share of steps whose k-th draft was accepted (τ > k), k in 1..K-1; when the steps' K are
        recorded (`ks`), among the steps that verified a k-th draft."""
        steps = list(zip(self.taus, self.step_ks))
        shares = []
        for k in range(1, self.verify_len):
            drafted = [t for t, kk in steps if kk > k]
            shares.append(sum(t > k for t in drafted) / len(drafted) if drafted else 0.0)
        return shares

    @property
    def step_ks(self) -> list[int]:
        """K of each step: `ks` where it was recorded for every step, else verify_len for each."""
        return self.ks if len(self.ks) == len(self.taus) else [self.verify_len] * len(self.taus)

    def count_draft(self, draft: str, steps: int) -> None:
        """`steps` more steps that verified `draft` ("chain:K" / "tree:N")."""
        self.draft_steps[draft] = self.draft_steps.get(draft, 0) + steps

    @property
    def draft_tokens(self) -> int:
        """Draft tokens the steps verified: K - 1 for a chain step of K slots, N - 1 for a tree of N nodes (all but the
        root), none for an AR step (K = 1)."""
        return sum(k - 1 for k in self.step_ks)

    @property
    def mean_verify_len(self) -> float:
        """Mean K over the steps (= verify_len for a fixed chain)."""
        ks = self.step_ks
        return sum(ks) / len(ks) if ks else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.new_tokens / self.decode_s if self.decode_s > 0 else 0.0

    @classmethod
    def merge(cls, parts: list["Stats"]) -> "Stats":
        """Pool the steps of many sequences. Times are summed per batch, so pass one Stats per batch for timings."""
        merged = cls(verify_len=max((p.verify_len for p in parts), default=1))
        for p in parts:
            merged.ks += p.step_ks
            merged.taus += p.taus
            for draft, steps in p.draft_steps.items():
                merged.count_draft(draft, steps)
            merged.new_tokens += p.new_tokens
            merged.prefill_s += p.prefill_s
            merged.decode_s += p.decode_s
        return merged

    def to_dict(self) -> dict:
        return {
            "verify_len": self.verify_len,
            "steps": self.steps,
            "new_tokens": self.new_tokens,
            "mean_tau": self.mean_tau,
            "mean_verify_len": self.mean_verify_len,
            "histogram": self.histogram,
            "per_position_acceptance": self.per_position_acceptance,
            "draft_steps": dict(self.draft_steps),
            "prefill_s": self.prefill_s,
            "decode_s": self.decode_s,
            "decode_tokens_per_s": self.decode_tokens_per_s,
        }

    def summary(self) -> str:
        accept = " ".join(f"{a:.2f}" for a in self.per_position_acceptance)
        # (the drafts only where more than one ran: a budget that chose per window)
        drafts = f" draft_steps={{{draft_steps_text(self.draft_steps)}}}" if len(self.draft_steps) > 1 else ""
        return (f"steps={self.steps} new_tokens={self.new_tokens} mean_tau={self.mean_tau:.2f} "
                f"tau_histogram={self.histogram} per_position_acceptance=[{accept}]{drafts} "
                f"decode={self.decode_tokens_per_s:.1f} tok/s")


def draft_steps_text(draft_steps: dict[str, int]) -> str:
    """"chain:1: 3, chain:8: 40, tree:16: 12": steps by draft, chains by K, then trees by N."""
    def order(item):
        kind, _, size = item[0].partition(":")
        return kind != "chain", int(size) if size.isdigit() else 0, item[0]

    return ", ".join(f"{d}: {n}" for d, n in sorted(draft_steps.items(), key=order))
