"""`dflash-trt train-drafter`: train a DFlash drafter for a frozen target (the DFlash recipe).

Per step, for a batch of self-distilled sequences (prompt + the target's greedy continuation):
  * one no-grad target forward gives the context features (hidden states after target_layer_ids);
  * `anchors` random positions per sequence, each a block `[token at anchor, MASK x (B-1)]` at positions
    anchor..anchor+B-1 that sees the context features strictly before the anchor (KV injection) and is bidirectional
    inside itself; blocks do not see each other — all blocks of a sequence go through the drafter in one pass;
  * cross-entropy on slots 1..B-1 against the target's own tokens, weighted w_k = exp(-(k-1)/gamma): early slots
    matter most, since a draft is only useful up to its first miss.
The drafter shares the target's (frozen) embedding and LM head; only its own layers, fc and norms are trained.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from dflash_trt import checkpoint as ckpt
from dflash_trt.errors import ConfigError
from dflash_trt.models.drafter import DFlashDrafter
from dflash_trt.models.target import TargetModel, load_target
from dflash_trt.train.data import encode_prompt, max_prefix_length, read_prompts, self_distill


@dataclass
class TrainConfig:
    target: str
    output: str
    corpus: str = "data/gsm8k_train.jsonl"
    work_dir: str | None = None  # checkpoints + distilled data; default: OUTPUT.work
    num_layers: int = 1
    target_layer_ids: list[int] | None = None  # default: z-lab's evenly spaced taps
    block_size: int = 16
    gamma: float = 7.0
    steps: int = 1000
    lr: float = 6e-4
    warmup_steps: int = 50
    weight_decay: float = 0.0
    batch_size: int = 8
    anchors: int = 8  # blocks per sequence per step
    num_prompts: int | None = None  # corpus prompts to self-distil (default: all)
    max_new_tokens: int = 192  # length of each self-distilled continuation
    branches: int = 1  # greedy continuations per prompt: 1 from the prompt, the others after a sampled prefix
    max_seq_len: int = 512
    device: str | None = None
    seed: int = 0
    checkpoint_every: int = 200
    minutes: float | None = None  # stop early after this much training time
    cache_features: bool = False  # compute the target's features once and keep them in host memory (small targets)
    resume: bool = False
    save_dtype: str | None = None  # default: the target's dtype

    @property
    def continuation_room(self) -> int:
        """Tokens a self-distilled sequence adds after its prompt: the continuation, and a branch's sampled prefix."""
        return self.max_new_tokens + (max_prefix_length(self.max_new_tokens) if self.branches > 1 else 0)

    def validate(self) -> "TrainConfig":
        for name in ("num_layers", "steps", "batch_size", "anchors", "max_new_tokens", "branches", "checkpoint_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be an integer >= 1, got {value!r}")
        if self.max_seq_len <= self.continuation_room:
            prefixes = self.continuation_room - self.max_new_tokens
            raise ConfigError(f"--max-seq-len ({self.max_seq_len}) must exceed --max-new-tokens ({self.max_new_tokens})"
                              + (f" plus the branches' sampled prefixes ({prefixes})" if prefixes else "")
                              + ": raise --max-seq-len or lower --max-new-tokens")
        if self.block_size < 2:
            raise ConfigError(f"--block-size must be >= 2, got {self.block_size}")
        if not self.gamma > 0:
            raise ConfigError(f"--gamma must be > 0, got {self.gamma}")
        if not self.lr > 0:
            raise ConfigError(f"--lr must be > 0, got {self.lr}")
        if self.save_dtype is not None and self.save_dtype not in ckpt.DTYPES:
            raise ConfigError(f"--save-dtype must be one of {sorted(ckpt.DTYPES)}, got {self.save_dtype!r}")
        return self


@dataclass
class History:
    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    tau: list[float] = field(default_factory=list)  # greedy acceptance length the drafter would get on the batch
    train_seconds: float = 0.0


def slot_weights(block_size: int, gamma: float) -> torch.Tensor:
    """w_k = exp(-(k-1)/gamma) for slots k = 1..B-1."""
    return torch.exp(-torch.arange(block_size - 1, dtype=torch.float32) / gamma)


def block_visibility(anchors: torch.Tensor, context_len: int, block_size: int) -> torch.Tensor:
    """visible [N, M*B, S + M*B]: block m sees context positions < anchor m, and its own B tokens only."""
    n, m = anchors.shape
    device = anchors.device
    key_pos = torch.arange(context_len, device=device)
    sees_context = (key_pos[None, None, :] < anchors[:, :, None])  # [N, M, S]
    sees_context = sees_context[:, :, None, :].expand(n, m, block_size, context_len).reshape(n, m * block_size, context_len)
    block_of = torch.arange(m * block_size, device=device) // block_size
    sees_block = (block_of[:, None] == block_of[None, :])[None].expand(n, -1, -1)
    return torch.cat([sees_context, sees_block], dim=-1)


def sample_anchors(sequences: list[tuple[int, list[int]]], rows: list[int], count: int, generator: torch.Generator):
    """`count` anchors per row, uniformly over the continuation (a in [prompt_len, len-2]: what inference drafts from)."""
    out = []
    for r in rows:
        prompt_len, tokens = sequences[r]
        lo, hi = prompt_len, len(tokens) - 2
        if hi < lo:  # continuation of a single token: anchor on the last prompt token instead
            lo = hi = max(0, len(tokens) - 2)
        picks = torch.randint(lo, hi + 1, (count,), generator=generator)
        out.append(picks)
    return torch.stack(out)


def drafter_loss(drafter: DFlashDrafter, target: TargetModel, tokens: torch.Tensor, lengths: torch.Tensor,
                 features: torch.Tensor, anchors: torch.Tensor, weights: torch.Tensor, mask_token_id: int):
    """Weighted block cross-entropy and the greedy acceptance length it implies. tokens [N, S], features [N, S, n*H],
    anchors [N, M]."""
    n, s = tokens.shape
    m, b = anchors.shape[1], drafter.block_size
    device = tokens.device
    offsets = torch.arange(b, device=device)
    positions = anchors[:, :, None] + offsets  # [N, M, B]
    block_ids = torch.full((n, m, b), mask_token_id, dtype=torch.long, device=device)
    block_ids[:, :, 0] = tokens.gather(1, anchors)
    label_pos = positions[:, :, 1:]
    valid = label_pos < lengths[:, None, None]
    labels = tokens.gather(1, label_pos.clamp_max(s - 1).reshape(n, -1)).reshape(n, m, b - 1)
    visible = block_visibility(anchors, s, b)
    embeds = target.embed(block_ids).reshape(n, m * b, -1).to(features.dtype)
    hidden = drafter.forward_train(embeds, positions.reshape(n, m * b), features,
                                   torch.arange(s, device=device)[None].expand(n, -1), visible)
    logits = target.logits(hidden.reshape(n, m, b, -1)[:, :, 1:].to(target.lm_head.weight.dtype)).float()
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none").reshape(n, m, b - 1)
    w = weights.to(device)[None, None, :] * valid
    loss = (ce * w).sum() / w.sum().clamp_min(1e-6)
    with torch.no_grad():
        hit = (logits.argmax(-1) == labels) & valid
        tau = 1 + hit.long().cumprod(-1).sum(-1).float().mean()
    return loss, tau


def _padded(batch: list[list[int]], device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded token ids [N, width] and lengths [N]."""
    width = max(len(t) for t in batch)
    tokens = torch.zeros(len(batch), width, dtype=torch.long, device=device)
    for i, t in enumerate(batch):
        tokens[i, : len(t)] = torch.tensor(t, device=device)
    return tokens, torch.tensor([len(t) for t in batch], device=device)


@torch.no_grad()
def target_features(target: TargetModel, tokens: torch.Tensor) -> torch.Tensor:
    """The target's context features (hidden states after its tapped layers, concatenated) [N, S, n*H] for right-padded
    tokens [N, S]; attention is causal, so a row's features do not depend on its padding or on the other rows."""
    n, width = tokens.shape
    rows = torch.arange(n, device=tokens.device)
    _, features = target(tokens, target.new_cache(n, width), rows, tap=True,
                         logits_at=torch.zeros(n, 1, dtype=torch.long, device=tokens.device), max_length=width)
    return features


def cache_target_features(target: TargetModel, batches: list[list[int]], device, batch_size: int = 32) -> list[torch.Tensor]:
    """--cache-features: every sequence's features, computed once, kept on the host in 16 bits (float16 for a float32
    target: 8x finer than bfloat16 where the values fit, which is checked). The training step then costs only the
    drafter: with a small target on CPU that halves it. Memory: tokens x n*H x 2 bytes."""
    store_dtype = target.lm_head.weight.dtype if target.lm_head.weight.dtype != torch.float32 else torch.float16
    order = sorted(range(len(batches)), key=lambda i: len(batches[i]))  # similar lengths together: little padding
    store: list[torch.Tensor | None] = [None] * len(batches)
    for lo in tqdm(range(0, len(order), batch_size), desc="target features", unit="batch"):
        idx = order[lo: lo + batch_size]
        tokens, lengths = _padded([batches[i] for i in idx], device)
        features = target_features(target, tokens)
        if store_dtype == torch.float16 and features.abs().max() >= torch.finfo(torch.float16).max:
            raise ConfigError("--cache-features: the target's hidden states overflow float16; train without it")
        for row, i in enumerate(idx):
            store[i] = features[row, : lengths[row]].to("cpu", store_dtype)
    return store  # type: ignore[return-value]


def _lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


# ---- checkpoints (safetensors + JSON: nothing is pickled) -----------------------------------------------------------


def _save_checkpoint(work: Path, drafter: DFlashDrafter, optimizer: torch.optim.Optimizer, step: int,
                     history: History, cfg: TrainConfig) -> None:
    from safetensors.torch import save_file

    flat = {}
    for index, state in optimizer.state_dict()["state"].items():
        for key, value in state.items():
            flat[f"{index}.{key}"] = value.detach().cpu().reshape(-1) if value.dim() == 0 else value.detach().cpu()
    with ckpt.atomic_directory(work / "checkpoint") as tmp:
        save_file({k: v.detach().contiguous().cpu() for k, v in drafter.state_dict().items()}, str(tmp / "drafter.safetensors"))
        save_file(flat, str(tmp / "optimizer.safetensors"))
        (tmp / "state.json").write_text(json.dumps({"step": step, "history": asdict(history), "config": asdict(cfg)}))


def _load_checkpoint(work: Path, drafter: DFlashDrafter, optimizer: torch.optim.Optimizer) -> tuple[int, History]:
    from safetensors.torch import load_file

    folder = work / "checkpoint"
    state = json.loads((folder / "state.json").read_text())
    drafter.load_state_dict(load_file(str(folder / "drafter.safetensors"), device=str(drafter.fc.weight.device)))
    flat = load_file(str(folder / "optimizer.safetensors"), device=str(drafter.fc.weight.device))
    opt_state = optimizer.state_dict()
    per_param: dict[int, dict] = {}
    for name, value in flat.items():
        index, key = name.split(".", 1)
        per_param.setdefault(int(index), {})[key] = value.reshape(()) if key == "step" else value
    opt_state["state"] = per_param
    optimizer.load_state_dict(opt_state)
    return state["step"], History(**state["history"])


def plot_history(history: History, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(history.steps, history.loss, label="weighted block CE", color="tab:blue")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax2 = ax.twinx()
    ax2.plot(history.steps, history.tau, label="batch greedy tau", color="tab:orange", alpha=0.7)
    ax2.set_ylabel("tau (acceptance length)")
    ax.set_title("DFlash drafter training")
    fig.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---- the loop -------------------------------------------------------------------------------------------------------


def train_drafter(cfg: TrainConfig) -> Path:
    from dflash_trt.checkpoint import load_tokenizer
    from dflash_trt.engines.torch_engine import TorchEngine, resolve_device

    cfg.validate()
    device = resolve_device(cfg.device)
    torch.manual_seed(cfg.seed)
    target_cfg = ckpt.load_target_config(cfg.target)
    tokenizer = load_tokenizer(cfg.target)
    if tokenizer is None:
        raise ConfigError(f"--target {cfg.target}: has no tokenizer; train-drafter needs one to encode the corpus")
    mask_id = tokenizer.mask_token_id if tokenizer.mask_token_id is not None else tokenizer.convert_tokens_to_ids("<|mask|>")
    if mask_id is None or not 0 <= mask_id < target_cfg.vocab_size:
        raise ConfigError(f"--target {cfg.target}: the tokenizer defines no mask token (mask_token) inside the vocabulary")
    drafter_cfg = ckpt.new_drafter_config(target_cfg, num_hidden_layers=cfg.num_layers, block_size=cfg.block_size,
                                          mask_token_id=mask_id, target_layer_ids=cfg.target_layer_ids,
                                          dtype=ckpt.DTYPES[cfg.save_dtype] if cfg.save_dtype else None)
    work = Path(cfg.work_dir or f"{cfg.output}.work")

    target = load_target(cfg.target, device=device, cfg=target_cfg)
    target.requires_grad_(False)
    target.tap_layer_ids = list(drafter_cfg.target_layer_ids)

    # 1. self-distillation data
    prompts = [encode_prompt(tokenizer, p)[-(cfg.max_seq_len - cfg.continuation_room):]
               for p in read_prompts(cfg.corpus, cfg.num_prompts)]
    engine = TorchEngine(target, None, tokenizer, max_batch_size=64, max_seq_len=cfg.max_seq_len)
    sequences = self_distill(engine, prompts, cfg.max_new_tokens, work / "distill.jsonl", branches=cfg.branches,
                             seed=cfg.seed)
    del engine

    batches = [tokens[: cfg.max_seq_len] for _, tokens in sequences]
    feature_store = cache_target_features(target, batches, device) if cfg.cache_features else None

    # 2. drafter + optimizer (fp32 master weights)
    drafter = DFlashDrafter(drafter_cfg).to(device=device, dtype=torch.float32).train()
    optimizer = torch.optim.AdamW(drafter.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    step, history = 0, History()
    if cfg.resume and (work / "checkpoint" / "state.json").is_file():
        step, history = _load_checkpoint(work, drafter, optimizer)
    weights = slot_weights(cfg.block_size, cfg.gamma)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu", enabled=False)

    bar = tqdm(total=cfg.steps, initial=step, desc="train-drafter", unit="step")
    started = time.perf_counter() - history.train_seconds
    while step < cfg.steps:
        g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)  # the batch depends only on (seed, step)
        rows = torch.randint(len(sequences), (cfg.batch_size,), generator=g).tolist()
        anchors = sample_anchors(sequences, rows, cfg.anchors, g).to(device)
        tokens, lengths = _padded([batches[r] for r in rows], device)
        anchors = torch.minimum(anchors, lengths[:, None] - 1)
        if feature_store is not None:
            features = torch.nn.utils.rnn.pad_sequence([feature_store[r] for r in rows], batch_first=True).to(device)
        else:
            features = target_features(target, tokens)
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, cfg)
        with autocast:
            loss, tau = drafter_loss(drafter, target, tokens, lengths, features.float(), anchors, weights, mask_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        optimizer.step()
        step += 1
        history.steps.append(step)
        history.loss.append(loss.item())
        history.tau.append(tau.item())
        history.train_seconds = time.perf_counter() - started
        bar.update(1)
        bar.set_postfix(loss=f"{history.loss[-1]:.3f}", tau=f"{history.tau[-1]:.2f}")
        out_of_time = cfg.minutes is not None and history.train_seconds >= cfg.minutes * 60
        if step % cfg.checkpoint_every == 0 or step == cfg.steps or out_of_time:
            _save_checkpoint(work, drafter, optimizer, step, history, cfg)
        if out_of_time:
            break
    bar.close()

    # 3. the z-lab directory, with the training record and loss curve beside the weights
    plot_history(history, work / "loss.png")
    tail = history.loss[-50:]
    record = {"settings": asdict(cfg), "steps_done": step, "train_seconds": round(history.train_seconds, 1),
              "final_loss_mean_last_50": sum(tail) / max(1, len(tail)),
              "final_batch_tau_mean_last_50": sum(history.tau[-50:]) / max(1, len(history.tau[-50:])),
              "sequences": len(sequences), "device": str(device), "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d")}
    save_dtype = drafter_cfg.dtype
    tensors = {k: v.detach().to(save_dtype) for k, v in drafter.state_dict().items()}
    ckpt.save_drafter(cfg.output, drafter_cfg, tensors, extra_files={
        "training.json": json.dumps(record, indent=2) + "\n", "loss.png": (work / "loss.png").read_bytes()})
    return Path(cfg.output)


def add_train_parser(sub) -> None:
    p = sub.add_parser("train-drafter", help="train a DFlash drafter for a target (self-distillation, DFlash block loss)")
    defaults = TrainConfig(target="", output="")
    p.add_argument("--target", required=True, help="target checkpoint directory (frozen; must have a tokenizer)")
    p.add_argument("--output", required=True, help="drafter directory to write (z-lab format)")
    p.add_argument("--corpus", default=defaults.corpus, help="JSONL prompts (question / turns / prompt / text)")
    p.add_argument("--work-dir", default=None, help="checkpoints + distilled data (default OUTPUT.work)")
    p.add_argument("--num-layers", type=int, default=defaults.num_layers)
    p.add_argument("--target-layer-ids", default=None, help="comma-separated target layers to tap (default: z-lab's)")
    p.add_argument("--block-size", type=int, default=defaults.block_size)
    p.add_argument("--gamma", type=float, default=defaults.gamma, help="slot weight decay: w_k = exp(-(k-1)/gamma)")
    p.add_argument("--steps", type=int, default=defaults.steps)
    p.add_argument("--lr", type=float, default=defaults.lr)
    p.add_argument("--warmup-steps", type=int, default=defaults.warmup_steps)
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--anchors", type=int, default=defaults.anchors, help="blocks per sequence per step")
    p.add_argument("--num-prompts", type=int, default=None)
    p.add_argument("--max-new-tokens", type=int, default=defaults.max_new_tokens)
    p.add_argument("--branches", type=int, default=defaults.branches,
                   help="greedy continuations per prompt: the first from the prompt, the others after a short sampled "
                        "prefix (more distinct contexts from the same corpus)")
    p.add_argument("--max-seq-len", type=int, default=defaults.max_seq_len)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--checkpoint-every", type=int, default=defaults.checkpoint_every)
    p.add_argument("--minutes", type=float, default=None,
                   help="stop after this much training time in all (a --resume run counts the time before it)")
    p.add_argument("--cache-features", action="store_true",
                   help="compute the target's features once and keep them in host memory (16-bit): for small targets, "
                        "whose forward is a large part of a training step")
    p.add_argument("--resume", action="store_true", help="continue from WORK_DIR/checkpoint")
    p.add_argument("--save-dtype", default=None, choices=sorted(ckpt.DTYPES))
    p.set_defaults(func=_run_train)


def _run_train(args) -> int:
    ids = None
    if args.target_layer_ids:
        try:
            ids = [int(x) for x in args.target_layer_ids.split(",")]
        except ValueError:
            raise ConfigError(f"--target-layer-ids must be comma-separated integers, got {args.target_layer_ids!r}") from None
    cfg = TrainConfig(target=args.target, output=args.output, corpus=args.corpus, work_dir=args.work_dir,
                      num_layers=args.num_layers, target_layer_ids=ids, block_size=args.block_size, gamma=args.gamma,
                      steps=args.steps, lr=args.lr, warmup_steps=args.warmup_steps, batch_size=args.batch_size,
                      anchors=args.anchors, num_prompts=args.num_prompts, max_new_tokens=args.max_new_tokens, branches=args.branches,
                      max_seq_len=args.max_seq_len, device=args.device, seed=args.seed,
                      checkpoint_every=args.checkpoint_every, minutes=args.minutes, resume=args.resume,
                      cache_features=args.cache_features,
                      save_dtype=args.save_dtype)
    out = train_drafter(cfg)
    print(f"drafter: {out}")
    return 0
