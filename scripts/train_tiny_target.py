#!/usr/bin/env python
"""Train the tiny GSM8K target fixture (tests/fixtures/gsm8k-tiny/target) on 2 CPU cores in ~15 minutes.

From data/gsm8k_train.jsonl, with fixed seeds:

1. a byte-level BPE tokenizer (vocab 2048, specials `<|endoftext|>` = EOS = pad and `<|mask|>` = the DFlash mask
   token), saved as a transformers PreTrainedTokenizerFast whose chat template renders a user turn as
   "Question: {q}\\nAnswer:" -- exactly the prefix of the training text "Question: {q}\\nAnswer: {a}<|endoftext|>";
2. a tiny Qwen3ForCausalLM (hidden 256, 4 layers, 4 heads / 2 KV heads, head_dim 64, MLP 640, tied embeddings,
   float32, ~3.3M parameters) trained with AdamW + cosine LR with warmup on one example per row (length-bucketed,
   right-padded, up to 256 tokens), 2% of the corpus held out for a validation loss;
3. saves both (safetensors only) plus training.json, then reloads the directory with the project's TorchEngine and
   prints greedy answers to three GSM8K *test* questions (data/prompts/eagle_gsm8k.jsonl) the model never saw.

GSM8K's calculator annotations (`<<48/2=24>>`) are stripped from the answers: "48/2 = <<48/2=24>>24" becomes
"48/2 = 24", plain text that a drafter can be measured on without trivially copyable spans.

    python scripts/train_tiny_target.py                       # default: 15 min of training, schedule by wall time
    python scripts/train_tiny_target.py --steps 1500 --minutes 0   # reproducible: a fixed step count, no time stop
    python scripts/train_tiny_target.py --steps 20 --output /tmp/t   # quick smoke run
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # tokenizers' BPE trainer: single-threaded -> deterministic merges
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EOS_TOKEN, MASK_TOKEN = "<|endoftext|>", "<|mask|>"
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{{ 'Question: ' + message['content'] + '\\n' }}"
    "{%- elif message['role'] == 'assistant' -%}{{ 'Answer: ' + message['content'] + eos_token }}"
    "{%- elif message['role'] == 'system' -%}{{ message['content'] + '\\n' }}"
    "{%- else -%}{{ raise_exception('unsupported role: ' + message['role']) }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ 'Answer:' }}{%- endif -%}"
)
CALC = re.compile(r"<<[^<>]*>>")
EVAL_TOKENS = 8192  # padded tokens per evaluation batch (forward only)

MODEL = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
             intermediate_size=640, tie_word_embeddings=True, rope_theta=10000.0, max_position_embeddings=1024,
             rms_norm_eps=1e-6, initializer_range=0.02)


def prompt_text(question: str) -> str:
    return f"Question: {question.strip()}\nAnswer:"


def train_text(question: str, answer: str) -> str:
    """Without the EOS: the tokenizer appends its id (so a literal '<|endoftext|>' in data can't fake one)."""
    return f"{prompt_text(question)} {CALC.sub('', answer).strip()}"


def load_rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ----------------------------------------------------------------------------------------------- tokenizer


def build_tokenizer(texts: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS_TOKEN, MASK_TOKEN],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS_TOKEN, mask_token=MASK_TOKEN,
                                   pad_token=EOS_TOKEN, clean_up_tokenization_spaces=False, model_max_length=1024)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def check_tokenizer(tok, questions: list[str], texts: list[str]) -> int:
    """The chat prompt is the exact string prefix of the training text, and its token ids are the id prefix."""
    for q in questions[:50]:
        rendered = tok.apply_chat_template([{"role": "user", "content": q.strip()}], tokenize=False,
                                           add_generation_prompt=True)
        if rendered != prompt_text(q):
            raise SystemExit(f"chat template renders {rendered!r}, expected {prompt_text(q)!r}")
    bad = 0
    for q, t in zip(questions, texts):
        p = tok(prompt_text(q), add_special_tokens=False)["input_ids"]
        full = tok(t, add_special_tokens=False)["input_ids"]
        bad += full[: len(p)] != p
    if bad:
        raise SystemExit(f"{bad} of {len(texts)} prompts do not tokenize as a prefix of their training text")
    return len(texts)


# ----------------------------------------------------------------------------------------------- data


def encode_all(tok, texts: list[str], seq_len: int) -> tuple[list[list[int]], int]:
    """One example per row: ids + EOS, truncated to seq_len (a truncated example keeps no EOS)."""
    eos = tok.eos_token_id
    out, truncated = [], 0
    for ids in tok(texts, add_special_tokens=False)["input_ids"]:
        ids = ids + [eos]
        if len(ids) > seq_len:
            ids, truncated = ids[:seq_len], truncated + 1
        out.append(ids)
    return out, truncated


def make_batches(examples: list[list[int]], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Shuffle, sort within chunks of ~64 batches by length, cut into batches of <= batch_tokens padded tokens,
    shuffle the batches. Returns lists of example indices."""
    order = list(range(len(examples)))
    rng.shuffle(order)
    chunk = max(1, 64 * batch_tokens // 160)
    batches = []
    for s in range(0, len(order), chunk):
        part = sorted(order[s: s + chunk], key=lambda i: len(examples[i]))
        cur, cur_max = [], 0
        for i in part:
            m = max(cur_max, len(examples[i]))
            if cur and m * (len(cur) + 1) > batch_tokens:
                batches.append(cur)
                cur, m = [], len(examples[i])
            cur.append(i)
            cur_max = m
        if cur:
            batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(examples: list[list[int]], idx: list[int], pad_id: int):
    """Right padding; no attention mask is needed: with a causal mask real tokens never see the pads after them.
    Labels are the inputs (the model shifts them); pads are -100."""
    n = max(len(examples[i]) for i in idx)
    ids = torch.full((len(idx), n), pad_id, dtype=torch.long)
    labels = torch.full((len(idx), n), -100, dtype=torch.long)
    for r, i in enumerate(idx):
        e = torch.tensor(examples[i], dtype=torch.long)
        ids[r, : len(e)] = e
        labels[r, : len(e)] = e
    return ids, labels


def batch_loss(model, ids, labels):
    """Sum of token losses and the number of predicted tokens."""
    logits = model(input_ids=ids).logits[:, :-1].float()
    tgt = labels[:, 1:]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                                             ignore_index=-100, reduction="sum")
    return loss, int((tgt != -100).sum())


@torch.no_grad()
def evaluate(model, examples, batch_tokens, pad_id) -> float:
    model.eval()
    total, count = 0.0, 0
    for idx in make_batches(examples, batch_tokens, random.Random(0)):
        ids, labels = collate(examples, idx, pad_id)
        loss, n = batch_loss(model, ids, labels)
        total, count = total + float(loss), count + n
    model.train()
    return total / max(count, 1)


# ----------------------------------------------------------------------------------------------- model


def new_model(vocab_size: int, eos_id: int, seed: int):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    m = dict(MODEL)
    cfg = Qwen3Config(vocab_size=vocab_size, hidden_size=m["hidden_size"], intermediate_size=m["intermediate_size"],
                      num_hidden_layers=m["num_hidden_layers"], num_attention_heads=m["num_attention_heads"],
                      num_key_value_heads=m["num_key_value_heads"], head_dim=m["head_dim"],
                      max_position_embeddings=m["max_position_embeddings"], rms_norm_eps=m["rms_norm_eps"],
                      tie_word_embeddings=m["tie_word_embeddings"], initializer_range=m["initializer_range"],
                      rope_parameters={"rope_type": "default", "rope_theta": m["rope_theta"]},
                      eos_token_id=eos_id, pad_token_id=eos_id, bos_token_id=None, use_cache=False,
                      attention_dropout=0.0)
    cfg.architectures = ["Qwen3ForCausalLM"]
    cfg.dtype = "float32"
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg).float()
    model.config.use_cache = False
    return model


def make_optimizer(model, lr: float, weight_decay: float, betas):
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas, eps=1e-8)


def lr_at(progress: float, step: int, lr: float, warmup: int, min_lr_ratio: float) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    p = min(max(progress, 0.0), 1.0)
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * p)))


# ----------------------------------------------------------------------------------------------- main


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "data" / "gsm8k_train.jsonl"))
    ap.add_argument("--prompts", default=str(ROOT / "data" / "prompts" / "eagle_gsm8k.jsonl"))
    ap.add_argument("--output", default=str(ROOT / "tests" / "fixtures" / "gsm8k-tiny" / "target"))
    ap.add_argument("--steps", type=int, default=None,
                    help="fixed number of optimizer steps, the cosine schedule follows steps (reproducible; "
                         "default: none, train for --minutes with the schedule following wall time)")
    ap.add_argument("--minutes", type=float, default=15.0,
                    help="training time budget (default 15); with --steps only a safety stop (0 = none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab-size", type=int, default=2048)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch-tokens", type=int, default=2048, help="padded tokens per batch (rows x longest row)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--val-fraction", type=float, default=0.02)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dry-run-steps", type=int, default=6)
    ap.add_argument("--evals", type=int, default=5, help="validation passes during training")
    ap.add_argument("--no-check", action="store_true", help="skip the TorchEngine generation check")
    args = ap.parse_args(argv)
    if args.minutes <= 0 and args.steps is None:
        ap.error("--minutes 0 needs --steps")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = time.time()
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    out = Path(args.output)

    rows = load_rows(Path(args.data))
    rng = random.Random(args.seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    n_val = max(1, round(len(rows) * args.val_fraction))
    val_rows, train_rows = [rows[i] for i in order[:n_val]], [rows[i] for i in order[n_val:]]
    train_texts = [train_text(r["question"], r["answer"]) for r in train_rows]
    val_texts = [train_text(r["question"], r["answer"]) for r in val_rows]
    print(f"corpus: {len(rows)} examples -> {len(train_rows)} train / {len(val_rows)} validation", flush=True)

    # 1. tokenizer (trained on the training split only, so validation text is unseen by it too)
    t0 = time.time()
    tok = build_tokenizer(train_texts, args.vocab_size)
    checked = check_tokenizer(tok, [r["question"] for r in train_rows], train_texts)
    eos_id, mask_id = tok.eos_token_id, tok.mask_token_id
    print(f"tokenizer: {len(tok)} tokens (eos {eos_id}, mask {mask_id}), prompt-prefix check ok on {checked} "
          f"examples, {time.time() - t0:.1f}s", flush=True)
    train_ex, trunc_train = encode_all(tok, train_texts, args.seq_len)
    val_ex, trunc_val = encode_all(tok, val_texts, args.seq_len)
    n_train_tokens = sum(len(e) for e in train_ex)
    print(f"train tokens/epoch {n_train_tokens:,} (mean {n_train_tokens / len(train_ex):.0f}/example, "
          f"{trunc_train} truncated to {args.seq_len}); validation tokens {sum(len(e) for e in val_ex):,}", flush=True)

    # 2. dry run on a throwaway model: seconds per step at this batch size on this machine
    dry_batches = make_batches(train_ex, args.batch_tokens, random.Random(args.seed + 1))[: args.dry_run_steps + 1]
    probe = new_model(len(tok), eos_id, args.seed + 1)
    popt = make_optimizer(probe, args.lr, args.weight_decay, (0.9, 0.95))
    times, toks = [], 0
    for k, idx in enumerate(dry_batches):
        ids, labels = collate(train_ex, idx, eos_id)
        ts = time.time()
        loss, n = batch_loss(probe, ids, labels)
        (loss / n).backward()
        popt.step()
        popt.zero_grad(set_to_none=True)
        if k:  # the first step warms up allocators
            times.append(time.time() - ts)
            toks += n
    del probe, popt
    dry_s = sum(times)
    sec_per_step = dry_s / len(times)
    tok_per_s = toks / dry_s
    budget_s = args.minutes * 60 if args.minutes > 0 else None
    # --steps: a fixed step count (the cosine follows steps; --minutes is then only a safety stop).
    # No --steps: the schedule follows wall time, training runs until the budget is spent; the dry run only sizes the
    # progress bar. Contended CPUs change speed by 3x within minutes, so a step count fixed up front would either
    # overrun the budget or waste it.
    time_mode = args.steps is None
    est_steps = args.steps if not time_mode else max(1, int(budget_s / sec_per_step))
    print(f"dry run: {sec_per_step:.2f} s/step, {tok_per_s:,.0f} predicted tokens/s -> "
          + (f"~{est_steps} steps in {args.minutes:g} min (schedule by time)" if time_mode else
             f"{est_steps} steps (~{est_steps * sec_per_step / 60:.1f} min)"), flush=True)

    # 3. train
    model = new_model(len(tok), eos_id, args.seed)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters ({n_params * 4 / 2**20:.1f} MiB float32)", flush=True)
    opt = make_optimizer(model, args.lr, args.weight_decay, (0.9, 0.95))
    data_rng = random.Random(args.seed + 2)
    batches, epoch = [], 0
    history, tokens_seen, ema = [], 0, None
    val0 = evaluate(model, val_ex, EVAL_TOKENS, eos_id)
    history.append({"step": 0, "val_loss": round(val0, 4)})
    t_train = time.time()
    stopped_by, step, next_eval = ("time" if time_mode else "steps"), 0, 1
    model.train()
    bar = tqdm(total=est_steps, desc="train", unit="step", dynamic_ncols=True, file=sys.stdout, mininterval=5)
    while True:
        elapsed = time.time() - t_train
        if time_mode:
            progress = elapsed / budget_s
        else:
            progress = step / args.steps
            if budget_s is not None and elapsed >= budget_s:
                progress, stopped_by = 1.0, "time"
        if progress >= 1.0:
            break
        if args.evals and progress >= next_eval / (args.evals + 1):
            next_eval += 1
            v = evaluate(model, val_ex, EVAL_TOKENS, eos_id)
            history.append({"step": step, "train_loss_ema": round(ema, 4), "val_loss": round(v, 4), "lr": lr,
                            "grad_norm": round(gnorm, 3), "elapsed_s": round(elapsed, 1)})
            tqdm.write(f"step {step}: train {ema:.4f} val {v:.4f} lr {lr:.2e} epoch {epoch} {elapsed:.0f}s")
        lr = lr_at(progress, step, args.lr, args.warmup, args.min_lr_ratio)
        for g in opt.param_groups:
            g["lr"] = lr
        if not batches:
            batches = make_batches(train_ex, args.batch_tokens, data_rng)
            epoch += 1
        ids, labels = collate(train_ex, batches.pop(), eos_id)
        loss, n = batch_loss(model, ids, labels)
        (loss / n).backward()
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip))
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        tokens_seen += n
        lv = loss.item() / n
        ema = lv if ema is None else 0.98 * ema + 0.02 * lv
        if time_mode and progress > 0.05:  # re-estimate the bar's length from the pace so far
            bar.total = max(step, round(step / max(progress, 1e-9)))
        bar.update(1)
        bar.set_postfix(loss=f"{ema:.3f}", lr=f"{lr:.2e}", ep=epoch, tok_s=f"{tokens_seen / (time.time() - t_train):,.0f}",
                        refresh=False)
    bar.close()
    train_s = time.time() - t_train
    # final losses: the validation split, and the same-size-in-tokens slice of the training split, both teacher forced
    val_loss = evaluate(model, val_ex, EVAL_TOKENS, eos_id)
    train_probe = train_ex[: len(val_ex)]
    train_loss = evaluate(model, train_probe, EVAL_TOKENS, eos_id)
    history.append({"step": step, "train_loss_ema": round(ema, 4), "val_loss": round(val_loss, 4),
                    "elapsed_s": round(train_s, 1)})
    print(f"trained {step} steps ({stopped_by}), {tokens_seen:,} tokens, {epoch} epochs, {train_s:.0f}s "
          f"({tokens_seen / train_s:,.0f} tok/s); final train loss {train_loss:.4f} (ema {ema:.4f}), "
          f"validation loss {val_loss:.4f} (ppl {math.exp(val_loss):.2f})", flush=True)

    # 4. save: weights (safetensors only) + config + tokenizer + training.json, written to a temp dir then swapped in
    tmp = out.parent / (out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    model.config.use_cache = True
    # generation_config.json was derived from the training config (use_cache=False): plain transformers generate would
    # then run without a KV cache. The saved model is for inference: the cache is on.
    model.generation_config.use_cache = True
    model.save_pretrained(str(tmp), safe_serialization=True)
    tok.save_pretrained(str(tmp))
    tcfg_path = tmp / "tokenizer_config.json"  # transformers 5 writes its own class name; 4.x knows only this one
    tcfg = json.loads(tcfg_path.read_text())
    tcfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    tcfg_path.write_text(json.dumps(tcfg, indent=2, sort_keys=True) + "\n")
    cfg_path = tmp / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["architectures"], cfg["model_type"], cfg["dtype"] = ["Qwen3ForCausalLM"], "qwen3", "float32"
    cfg["rope_theta"] = MODEL["rope_theta"]  # transformers 4.x reads this; 5.x reads rope_parameters
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    record = {
        "what": "tiny Qwen3 target trained on GSM8K train (openai/grade-school-math, MIT); test fixture",
        "script": "scripts/train_tiny_target.py",
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]) if argv is None else " ".join(argv),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"CPU, {args.threads} cores",
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "tokenizers": __import__("tokenizers").__version__,
        "seed": args.seed,
        "data": {
            "file": "data/gsm8k_train.jsonl", "examples": len(rows), "train_examples": len(train_rows),
            "validation_examples": len(val_rows), "validation_split": f"first {n_val} of random.Random(seed) shuffle",
            "format": "Question: {question}\\nAnswer: {answer}<|endoftext|>",
            "calculator_annotations": "stripped (<<...>> removed)",
            "train_tokens_per_epoch": n_train_tokens, "truncated_examples_train": trunc_train,
            "truncated_examples_validation": trunc_val,
        },
        "tokenizer": {"type": "byte-level BPE (tokenizers), add_prefix_space=False, trained on the train split",
                      "vocab_size": len(tok), "eos_token": EOS_TOKEN, "eos_token_id": eos_id,
                      "pad_token": EOS_TOKEN, "mask_token": MASK_TOKEN, "mask_token_id": mask_id,
                      "chat_template": "user -> 'Question: {content}\\n'; generation prompt -> 'Answer:'"},
        "model": {**MODEL, "architecture": "Qwen3ForCausalLM", "vocab_size": len(tok), "parameters": n_params,
                  "dtype": "float32"},
        "training": {
            "optimizer": "AdamW", "lr": args.lr, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": args.weight_decay,
            "weight_decay_on": "matrices only (not norms)", "schedule": "linear warmup then cosine to min_lr_ratio*lr",
            "warmup_steps": args.warmup, "min_lr_ratio": args.min_lr_ratio, "grad_clip": args.grad_clip,
            "seq_len": args.seq_len, "batching": "one example per row, length-bucketed, right-padded, loss on all "
                                                 "non-pad tokens (question and answer)",
            "batch_tokens": args.batch_tokens, "planned_steps": args.steps, "steps": step, "stopped_by": stopped_by,
            "schedule_by": "wall time (no --steps)" if time_mode else "steps", "time_budget_min": args.minutes,
            "epochs_started": epoch, "tokens_seen": tokens_seen,
            "dry_run_sec_per_step": round(sec_per_step, 3), "dry_run_tokens_per_s": round(tok_per_s),
            "tokens_per_s": round(tokens_seen / train_s), "train_wall_s": round(train_s, 1),
        },
        "final": {"train_loss": round(train_loss, 4), "train_loss_ema": round(ema, 4),
                  "validation_loss": round(val_loss, 4), "validation_ppl": round(math.exp(val_loss), 3),
                  "train_loss_on": f"first {len(train_probe)} training examples, teacher forced"},
        "history": history,
    }
    for f in tmp.iterdir():
        f.chmod(0o644)
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)

    # 5. check with the project's own loader: greedy answers to unseen GSM8K test questions
    samples = []
    if not args.no_check:
        sys.path.insert(0, str(ROOT))
        from dflash_trt.bench.datasets import load_prompt_set
        from dflash_trt.engines.torch_engine import TorchEngine
        from dflash_trt.spec.sampling import SamplingParams

        engine = TorchEngine.from_pretrained(str(out), None, device="cpu")
        questions = load_prompt_set(args.prompts, 3).turns
        prompts = [engine.tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                                        add_generation_prompt=True) for q in questions]
        results = engine.generate(prompts, SamplingParams(max_new_tokens=96), use_drafter=False)
        for p, r in zip(prompts, results):
            print("-" * 80 + f"\n{p}{r.text}\n[finish: {r.finish_reason}]", flush=True)
            samples.append({"prompt": p, "completion": r.text, "finish_reason": str(r.finish_reason)})
    record["wall_s"] = round(time.time() - t_start, 1)
    record["samples_greedy"] = samples
    (out / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"saved {out} ({size / 2**20:.2f} MiB); total wall time {record['wall_s']:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
