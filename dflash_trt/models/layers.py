"""Building blocks shared by the target and the drafter. Numerics follow transformers' Qwen3/Llama modules
(RMSNorm in float32, RoPE tables in float32 then cast) so the oracle tests can use tight tolerances."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' Qwen3/Llama RMSNorm: normalise in float32, cast back, then scale (`weight * x.to(dtype)`), bit for
    bit. One fused op in float32 (there the cast is a no-op and w * y == y * w); normalise-then-scale otherwise."""
    if x.dtype == torch.float32 and weight.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)
    return weight * F.rms_norm(x, weight.shape, None, eps)


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int, bias: bool = False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)
        self.gate_up: Fused | None = None  # see fuse()
        self.down: Fused | None = None

    def fuse(self, transposed: bool) -> None:
        """One GEMM for gate and up (see Fused); down_proj in the same layout."""
        self.gate_up = Fused.of(transposed, self.gate_proj, self.up_proj)
        self.down = Fused.of(transposed, self.down_proj)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up is not None and self.down is not None and _plain(self.gate_proj, self.up_proj, self.down_proj):
            gate, up = self.gate_up(x).chunk(2, dim=-1)
            return self.down(F.silu(gate) * up)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def _plain(*modules: nn.Module) -> bool:
    """Plain nn.Linear (not ModelOpt's quantized modules, which swap the class, nor our QuantLinear)."""
    return all(type(m) is nn.Linear for m in modules)


class Fused:
    """The inference layout of one or more nn.Linear that read the same input: their weights stacked along the output
    dimension into one tensor, applied as one GEMM; the modules' own parameters become views into it (what is loaded,
    saved and quantized is unchanged; nothing is copied twice).

    transposed (the CPU layout): the stack is stored [in, out], contiguous, and applied as x @ W^T-stored. MKL's
    single-row GEMMs (the AR step) run about 1.5x faster with the weight in that layout than with nn.Linear's
    [out, in]; 16-row ones (a K = 16 verify) within -5..+7 % (2026-11-24, one core, the fixture's shapes: 1x256 @
    256x1280 35 -> 24 us, 1x256 @ 256x2048 56 -> 37 us; 16x256 @ 256x1280 148 -> 138 us). On CUDA the nn.Linear
    layout is kept."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, transposed: bool):
        self.weight, self.bias, self.transposed = weight, bias, transposed

    @classmethod
    def of(cls, transposed: bool, *linears: nn.Linear) -> "Fused | None":
        if not _plain(*linears):
            return None
        weight = torch.cat([m.weight.detach() for m in linears])
        has_bias = linears[0].bias is not None
        bias = torch.cat([m.bias.detach() for m in linears]) if has_bias else None
        stored = weight.t().contiguous() if transposed else weight
        start = 0
        for m in linears:
            rows = m.weight.shape[0]
            view = stored[:, start: start + rows].t() if transposed else stored[start: start + rows]
            m.weight = nn.Parameter(view, requires_grad=False)
            if has_bias:
                m.bias = nn.Parameter(bias[start: start + rows], requires_grad=False)
            start += rows
        return cls(stored, bias, transposed)

    def rows(self, start: int, stop: int) -> "Fused":
        """The same projection restricted to output features start..stop-1 (a view)."""
        weight = self.weight[:, start:stop] if self.transposed else self.weight[start:stop]
        return Fused(weight, self.bias[start:stop] if self.bias is not None else None, self.transposed)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not self.transposed:
            return F.linear(x, self.weight, self.bias)
        x2 = x.reshape(-1, x.shape[-1])
        y = torch.mm(x2, self.weight) if self.bias is None else torch.addmm(self.bias, x2, self.weight)
        return y.view(*x.shape[:-1], y.shape[-1])


class RotaryEmbedding(nn.Module):
    """cos/sin tables for absolute positions. Scaled variants (linear, llama3, yarn) come from transformers'
    ROPE_INIT_FUNCTIONS so the frequencies are exactly the ones the checkpoint was trained with."""

    def __init__(self, head_dim: int, rope: dict[str, Any], hf_config=None):
        super().__init__()
        rope_type = rope.get("rope_type", "default")
        if rope_type == "default":
            base = float(rope.get("rope_theta", 10000.0))
            inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
            self.attention_scaling = 1.0
        else:
            from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

            inv_freq, self.attention_scaling = ROPE_INIT_FUNCTIONS[rope_type](hf_config, "cpu")
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)
        self.table: tuple[torch.Tensor, torch.Tensor] | None = None  # see precompute()

    def _cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[..., None].float() * self.inv_freq
        cos = (freqs.cos() * self.attention_scaling).to(dtype)
        sin = (freqs.sin() * self.attention_scaling).to(dtype)
        return torch.cat((cos, cos), dim=-1), torch.cat((-sin, sin), dim=-1)

    def precompute(self, num_positions: int, dtype: torch.dtype) -> None:
        """Tables for positions 0..num_positions-1 in `dtype` (the engine's cache capacity): a forward then looks its
        positions up (one index each) instead of computing them; the values are the same, element for element."""
        positions = torch.arange(num_positions, device=self.inv_freq.device)
        self.table = self._cos_sin(positions, dtype)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [N, T] -> (cos, signed sin) [N, T, 1, head_dim] in `dtype`, ready for apply_rope: the sin's first
        half negated, so that rotate_half(x) * sin == x.roll(D/2) * signed sin, exactly."""
        if self.table is not None and self.table[0].dtype == dtype:
            cos, sin = self.table[0][positions], self.table[1][positions]
        else:
            cos, sin = self._cos_sin(positions, dtype)
        return cos[:, :, None], sin[:, :, None]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x [N, T, H, D]; cos/signed_sin [N, T, 1, D] from RotaryEmbedding. transformers' x * cos + rotate_half(x) * sin,
    with rotate_half(x) = cat(-x2, x1) written as roll(x, D/2) = cat(x2, x1) times the negated first half of sin: the
    same products, bit for bit, in 4 ops instead of 8."""
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * signed_sin


class Positions(NamedTuple):
    """Where T new tokens per row go and what they see, for a forward over cache + new tokens (TargetModel, HfTarget)."""

    write: torch.Tensor  # [N, T] cache positions the tokens are written at: start + 0..T-1
    rope: torch.Tensor  # [N, T] their positions in the sequence (RoPE): = write, or start + depth for a draft tree
    visible: torch.Tensor  # [N, T, upto] bool: the keys each token attends to
    keys: torch.Tensor  # [N or 1, upto] each key's position in the sequence (what sliding windows measure)


def forward_positions(start: torch.Tensor, t: int, upto: int,
                      tree: tuple[torch.Tensor, torch.Tensor] | None = None) -> Positions:
    """start [N] (each row's cache length), T new tokens, keys 0..upto-1. Without a tree: causal over cache + new
    tokens. With a draft tree (depth [N, T], ancestors [N, T, T] bool; spec/tree.py): token i is still written at
    start + i, but sits at start + depth[i] in the sequence and sees the cache before start and its ancestors (key
    start + j where ancestors[:, i, j]); key start + j sits at start + depth[j]."""
    write = start[:, None] + torch.arange(t, device=start.device)
    keys = torch.arange(upto, device=start.device)
    if tree is None:
        return Positions(write, write, keys[None, None, :] <= write[:, :, None], keys[None, :])
    depth, ancestors = tree
    node = keys[None, :] - start[:, None]  # [N, upto]: the key's node index (< 0: the cache before start)
    at = node.clamp(0, t - 1)
    in_tree = (node >= 0) & (node < t)
    is_ancestor = ancestors.gather(2, at[:, None, :].expand(-1, t, -1))  # [N, T, upto]: ancestors[:, i, node]
    visible = (node < 0)[:, None, :] | (in_tree[:, None, :] & is_ancestor)
    return Positions(write, start[:, None] + depth, visible,
                     torch.where(in_tree, start[:, None] + depth.gather(1, at), keys[None, :]))


def spread(x: torch.Tensor, within: torch.Tensor, rows: int) -> torch.Tensor:
    """x [N, ...] placed at rows `within` of a [rows, ...] tensor of zeros (kv_cache.slot_span)."""
    out = x.new_zeros((rows,) + tuple(x.shape[1:]))
    out[within] = x
    return out


def span_visible(visible: torch.Tensor, within: torch.Tensor, rows: int) -> torch.Tensor:
    """A forward's attention mask [N, T, S] spread over the span its K/V rows are read from (kv_cache.slot_span): the
    rows of other slots see their first key only (something to attend to: a row that sees nothing gives NaN)."""
    out = visible.new_zeros((rows,) + tuple(visible.shape[1:]))
    out[..., 0] = True
    out[within] = visible
    return out


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor, scale: float,
              within: torch.Tensor | None = None) -> torch.Tensor:
    """q [N, T, Hq, D], k/v [N, S, Hkv, D], visible [N, T, S] bool -> [N, T, Hq*D]. GQA without copying K/V.
    within: k/v (and `visible`, made by span_visible) hold the rows of a span of slots, q's are its rows `within`:
    attention runs over the span (each row apart from the others) and returns q's rows."""
    if within is not None:
        return attention(spread(q, within, k.shape[0]), k, v, visible, scale)[within]
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
        attn_mask=visible[:, None], scale=scale, enable_gqa=bool(q.shape[2] != k.shape[2]),
    )
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[1], -1)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """q [N, T, Hq, D], k/v [N, T, Hkv, D] of the same T tokens, token i attending to tokens 0..i (a prefill into empty
    caches; right-padded rows' real tokens only see real ones) -> [N, T, Hq*D], without a mask: K/V heads repeated to
    q's and SDPA's flash or memory-efficient kernel (math where neither applies), never cuDNN, which PyTorch picks on
    CUDA for `attention`'s masked GQA and which builds a plan per new shape: 40-700 ms for every new prompt length
    (H200, torch 2.11)."""
    rep = q.shape[2] // k.shape[2]
    if rep > 1:
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                             scale=scale)
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[1], -1)


class Attention(nn.Module):
    """Projections and norms of one attention layer; the target and drafter differ only in what they attend to."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, bias: bool, qk_norm: bool, eps: float):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.scale = head_dim**-0.5
        self.eps = eps
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=bias)
        self.q_norm = RMSNorm(head_dim, eps) if qk_norm else None
        self.k_norm = RMSNorm(head_dim, eps) if qk_norm else None
        self.qkv: Fused | None = None  # see fuse()
        self.kv: Fused | None = None
        self.o: Fused | None = None
        self.qk_norm_weight: torch.Tensor | None = None  # [Hq + Hkv, D]: q_norm's weight per q head, then k_norm's

    def fuse(self, transposed: bool) -> None:
        """One GEMM for q, k and v (see Fused), o_proj in the same layout, and one norm + one RoPE over the q and k
        heads together (the same products per element as separately)."""
        self.qkv = Fused.of(transposed, self.q_proj, self.k_proj, self.v_proj)
        self.o = Fused.of(transposed, self.o_proj)
        if self.qkv is not None:
            self.kv = self.qkv.rows(self.heads * self.head_dim, self.qkv.weight.shape[1 if transposed else 0])
        if self.qkv is not None and self.q_norm is not None:
            self.qk_norm_weight = torch.cat([self.q_norm.weight.detach().expand(self.heads, -1),
                                             self.k_norm.weight.detach().expand(self.kv_heads, -1)])

    def project_qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x [N, T, hidden] -> q [N, T, Hq, D], k, v [N, T, Hkv, D] (q and k normed and rotated)."""
        n, t, h = x.shape[0], x.shape[1], self.heads
        if self.qkv is not None and _plain(self.q_proj, self.k_proj, self.v_proj):
            qkv = self.qkv(x).view(n, t, h + 2 * self.kv_heads, self.head_dim)
            qk, v = qkv[:, :, : h + self.kv_heads], qkv[:, :, h + self.kv_heads:]
            if self.qk_norm_weight is not None:
                qk = self.qk_norm_weight * F.rms_norm(qk, (self.head_dim,), None, self.eps)
            qk = apply_rope(qk, cos, sin)
            return qk[:, :, :h], qk[:, :, h:], v
        q = self.q_proj(x).view(n, t, h, self.head_dim)
        if self.q_norm is not None:
            q = self.q_norm(q)
        k, v = self.project_kv(x, cos, sin)
        return apply_rope(q, cos, sin), k, v

    def project_kv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [N, T, hidden] -> k (normed, rotated), v [N, T, Hkv, D]: the drafter's KV injection of context features."""
        n, t = x.shape[0], x.shape[1]
        if self.kv is not None and _plain(self.k_proj, self.v_proj):
            kv = self.kv(x).view(n, t, 2 * self.kv_heads, self.head_dim)
            k, v = kv[:, :, : self.kv_heads], kv[:, :, self.kv_heads:]
        else:
            k = self.k_proj(x).view(n, t, self.kv_heads, self.head_dim)
            v = self.v_proj(x).view(n, t, self.kv_heads, self.head_dim)
        if self.k_norm is not None:
            k = self.k_norm(k)
        return apply_rope(k, cos, sin), v

    def out(self, attn: torch.Tensor) -> torch.Tensor:
        """o_proj (in the fused layout when there is one)."""
        return self.o(attn) if self.o is not None and _plain(self.o_proj) else self.o_proj(attn)
