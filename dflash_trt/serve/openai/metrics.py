"""Prometheus metrics of the OpenAI server (`GET /metrics`, text exposition format), one registry per server.

    dflash_requests_total{finish_reason}            finished requests, one per choice: stop, length, error, abort
                                                    (abort: the client went away, or the server stopped)
    dflash_requests_rejected_total                  requests answered with a 4xx error (nothing generated)
    dflash_prompt_tokens_total                      prompt tokens prefilled (per choice)
    dflash_generation_tokens_total                  tokens generated (per choice, including any past a stop string)
    dflash_acceptance_length                        histogram of τ per speculative step (1..K, the bonus included)
    dflash_spec_steps_total                         decode steps (per request per step)
    dflash_accepted_draft_tokens_by_position_total{position}   steps whose k-th draft was accepted (τ > k), k = 1..K-1;
                                                    divided by dflash_spec_steps_total: the acceptance rate at k
    dflash_draft_steps_total{draft}                 decode steps by the draft they verified: chain:K, tree:N (chain:1 =
                                                    an AR step); with --draft auto, what the budget chose (AR under
                                                    load, a tree at low load, ...); one label with a fixed draft
    dflash_time_to_first_token_seconds              histogram: request admitted -> its first token
    dflash_requests_running / dflash_requests_waiting   gauges: requests holding a batch slot / queued for one
    dflash_verify_len                               gauge: K (1 = plain autoregressive)
    dflash_cuda_graphs                              gauge: step shapes captured as CUDA graphs (0 without them)
    dflash_cuda_graph_first_use_seconds             gauge: seconds windows spent on shapes they met first (an eager
                                                    run + a capture each, while requests waited; the ones captured at
                                                    start are not counted)
"""

from __future__ import annotations

from collections.abc import Sequence

FINISH_REASONS = ("stop", "length", "error", "abort")


class Metrics:
    def __init__(self, verify_len: int):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.k = verify_len
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("dflash_requests", "Finished requests (one per choice) by finish reason",
                                ["finish_reason"], registry=r)
        for reason in FINISH_REASONS:
            self.requests.labels(reason)
        self.rejected = Counter("dflash_requests_rejected", "Requests refused with a 4xx error", registry=r)
        self.prompt_tokens = Counter("dflash_prompt_tokens", "Prompt tokens prefilled (per choice)", registry=r)
        self.generation_tokens = Counter("dflash_generation_tokens", "Tokens generated (per choice)", registry=r)
        self.tau = Histogram("dflash_acceptance_length", "Acceptance length (tau, bonus token included) per "
                             "speculative step", buckets=[float(t) for t in range(1, verify_len + 1)], registry=r)
        self.steps = Counter("dflash_spec_steps", "Decode steps (per request per step)", registry=r)
        self.by_position = Counter("dflash_accepted_draft_tokens_by_position", "Steps whose k-th draft token was "
                                   "accepted (tau > k)", ["position"], registry=r)
        for k in range(1, verify_len):
            self.by_position.labels(str(k))
        self.draft_steps = Counter("dflash_draft_steps", "Decode steps by the draft they verified (chain:K, tree:N; "
                                   "chain:1 = autoregressive)", ["draft"], registry=r)
        self.ttft = Histogram("dflash_time_to_first_token_seconds", "Request admitted to its first token",
                              buckets=[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], registry=r)
        self.running = Gauge("dflash_requests_running", "Requests holding a batch slot", registry=r)
        self.waiting = Gauge("dflash_requests_waiting", "Requests queued for a batch slot", registry=r)
        self.graphs = Gauge("dflash_cuda_graphs", "Step shapes captured as CUDA graphs", registry=r)
        self.first_use = Gauge("dflash_cuda_graph_first_use_seconds", "Seconds windows spent on step shapes they met "
                               "first (eager run + capture) after start", registry=r)
        Gauge("dflash_verify_len", "K, block slots verified per step (1 = autoregressive)", registry=r).set(verify_len)

    def observe_taus(self, taus: Sequence[int]) -> None:
        for t in taus:
            self.tau.observe(t)
            for k in range(1, min(t, self.k)):
                self.by_position.labels(str(k)).inc()
        if taus:
            self.steps.inc(len(taus))

    def observe_drafts(self, draft_steps: dict[str, int], seen: dict[str, int]) -> None:
        """A request's steps by draft (Stats.draft_steps, cumulative) counted beyond `seen` (what was counted of it
        before; updated)."""
        for draft, steps in draft_steps.items():
            if steps > seen.get(draft, 0):
                self.draft_steps.labels(draft).inc(steps - seen.get(draft, 0))
                seen[draft] = steps

    def render(self) -> tuple[bytes, str]:
        """(body, content type) of the exposition."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
