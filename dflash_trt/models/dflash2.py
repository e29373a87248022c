"""DFlash2's two additions to the DFlash drafter (architectures ["DFlash2DraftModel"]).

Followed: vLLM PR #52816, vllm/model_executor/models/qwen3_dflash2.py (commit 030da62) and
vllm/v1/worker/gpu/spec_decode/dflash2/speculator.py. Weight names are the reference's, so a checkpoint loads as is.

Grouped dynamic depthwise convolution (`GroupedConv`, the reference's DFlashGroupedConv / _grouped_conv):
* tensors: `base_kernel` [2, T, H] (T = conv_kernel_size taps; side 0 before the sublayer, side 1 after it) and
  `kernel_projection` (Linear H -> 2*T*G, no bias; G = H / conv_group_size groups).
* around a sublayer f (attention or MLP) of a layer, on the normed input x of that sublayer:
  d = kernel_projection(x) viewed [.., 2, T, G]; y = f(conv(x, d[0], base[0])); out = conv(y, d[1], base[1]) — the
  coefficients of BOTH sides come from x (the reference's prepare/finish), and out is what the residual adds.
* conv(x, d, base)[t] = sum_{j < T, j <= p(t)} (base[j] + d[t, j] broadcast over each group's channels) * x[t - j],
  with p(t) the row's index inside its block: tap 0 is the row itself, tap j the row j before it; taps that would
  reach before the block's first row are zero (causal inside the block, zero across the block boundary).
* which rows: only block rows (the queries: the anchor at p = 0 and the MASK rows). Context rows never pass through
  the sublayers (their K/V are injected from the fc features by each layer's k/v projections), so no conv touches
  them. The reference's conv block is its query block, 1 + num_speculative_tokens; ours is the drafter's block
  (block_size rows, run whole at any verify length): the conv is causal, so a row's conv input is the same either way.

Candidate selector (`CandidateSelector`, the reference's CandidateSelector / _score_edges / compute_candidates and
the speculator's _selector_walk_kernel):
* tensors: `predecessor_codebook` A [V, r], `successor_codebook` B [V, r], `hidden_projection` (Linear H -> r).
* per drafted slot l (block rows 1..k-1, final-normed hidden h_l): candidates c_l = the target head's top-K ids
  (K = selector_top_k), unary u_l = their logits * output_multiplier, then tanh(u / cap) * cap if
  final_logit_softcapping > 0; score(l, p -> c) = u_l[c] + sum_r A[pred_l(p), r] * hidden_projection(h_l)[r] *
  B[c_l[c], r], with pred_0 = the anchor (the block's first token, the last verified one) and pred_l = c_{l-1}.
* the walk (greedy, the reference's temperature == 0 branch): start at index 0, at slot l take the candidate with the
  highest score from the previous slot's chosen index (lowest index on ties); the drafts are the walked ids.
"""

from __future__ import annotations

import torch
from torch import nn


class GroupedConv(nn.Module):
    """Grouped dynamic depthwise convolution over the rows of a block (module docstring)."""

    def __init__(self, hidden_size: int, taps: int, group_size: int, block_size: int):
        super().__init__()
        if hidden_size % group_size:
            raise ValueError(f"conv_group_size={group_size} must divide hidden_size={hidden_size}")
        self.taps, self.group_size, self.block_size = taps, group_size, block_size
        self.groups = hidden_size // group_size
        self.base_kernel = nn.Parameter(torch.empty(2, taps, hidden_size))
        self.kernel_projection = nn.Linear(hidden_size, 2 * taps * self.groups, bias=False)

    def _convolve(self, x: torch.Tensor, delta: torch.Tensor, side: int) -> torch.Tensor:
        """x [N, Q, H] (Q rows: whole blocks of block_size, in order), delta [N, Q, T, G] -> [N, Q, H]."""
        n, q, h = x.shape
        xs = x.view(n, q, self.groups, self.group_size)
        kernel = self.base_kernel[side].view(self.taps, self.groups, self.group_size)
        out = (kernel[0] + delta[:, :, 0, :, None]) * xs
        inside = torch.arange(q, device=x.device) % self.block_size  # row index inside its block
        for j in range(1, min(self.taps, q)):
            back = torch.zeros_like(xs)
            back[:, j:] = xs[:, :-j]
            keep = (inside >= j).to(x.dtype)[None, :, None, None]
            out = out + (kernel[j] + delta[:, :, j, :, None]) * back * keep
        return out.view(n, q, h)

    def prepare(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The sublayer's normed input x -> (its convolved input, the after-side coefficients [N, Q, T, G])."""
        d = self.kernel_projection(x).view(*x.shape[:2], 2, self.taps, self.groups)
        return self._convolve(x, d[:, :, 0], 0), d[:, :, 1]

    def finish(self, y: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        """The sublayer's output y -> the convolved output (what the residual adds)."""
        return self._convolve(y, delta, 1)


class CandidateSelector(nn.Module):
    """Low-rank candidate path selector (module docstring)."""

    def __init__(self, hidden_size: int, vocab_size: int, rank: int, top_k: int, output_multiplier: float = 1.0,
                 softcap: float | None = None):
        super().__init__()
        self.top_k, self.output_multiplier, self.softcap = top_k, output_multiplier, softcap
        self.predecessor_codebook = nn.Parameter(torch.empty(vocab_size, rank))
        self.successor_codebook = nn.Parameter(torch.empty(vocab_size, rank))
        self.hidden_projection = nn.Linear(hidden_size, rank, bias=False)

    def candidates(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Head logits [n, L, V] -> (top-K ids [n, L, K], unary scores [n, L, K] float32, multiplied and capped)."""
        values, ids = torch.topk(logits, self.top_k, dim=-1)
        values = values.float() * self.output_multiplier
        if self.softcap is not None:
            values = torch.tanh(values / self.softcap) * self.softcap
        return ids, values

    def scores(self, ids: torch.Tensor, unary: torch.Tensor, hidden: torch.Tensor,
               anchor: torch.Tensor) -> torch.Tensor:
        """Edge scores [n, L, K (previous index), K (candidate)] for ids/unary [n, L, K], hidden [n, L, H] (the drafted
        slots' final-normed hidden states), anchor [n] (the block's first token)."""
        n, length, k = ids.shape
        projected = self.hidden_projection(hidden)  # [n, L, r]
        previous = torch.cat([anchor[:, None, None].expand(n, 1, k), ids[:, :-1]], dim=1)  # [n, L, K]
        pred = self.predecessor_codebook[previous] * projected[:, :, None, :]  # [n, L, K, r]
        succ = self.successor_codebook[ids]  # [n, L, K, r]
        return unary[:, :, None, :] + torch.matmul(pred, succ.transpose(-1, -2)).float()

    @staticmethod
    def walk(ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Greedy path: from index 0, at each slot the best-scoring candidate from the previous choice -> ids [n, L]."""
        n, length, k = ids.shape
        chosen = torch.zeros(n, dtype=torch.long, device=ids.device)
        out = []
        for step in range(length):
            row = scores[:, step].gather(1, chosen[:, None, None].expand(n, 1, k))[:, 0]  # [n, K]
            chosen = row.argmax(-1)  # the first maximum on ties, as the reference
            out.append(ids[:, step].gather(1, chosen[:, None]))
        return torch.cat(out, dim=1) if out else ids.new_zeros(n, 0)

    def forward(self, hidden: torch.Tensor, logits: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
        """hidden [n, L, H] and the target head's logits [n, L, V] of the drafted slots, anchor [n] -> drafts [n, L]."""
        ids, unary = self.candidates(logits)
        return self.walk(ids, self.scores(ids, unary, hidden, anchor))
