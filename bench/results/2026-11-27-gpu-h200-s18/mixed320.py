"""The 320 mixed prompts of runs 2-3 (`.whl/mixed320.jsonl` there): the four EAGLE sets' 80 prompts each, interleaved
(gsm8k, mt_bench, humaneval, alpaca, gsm8k, ...), so each batch mixes domains. `python mixed320.py OUT.jsonl`
(from the repository root)."""
import json, sys
sets = ["gsm8k", "mt_bench", "humaneval", "alpaca"]
rows = [[json.loads(l) for l in open(f"data/prompts/eagle_{s}.jsonl") if l.strip()] for s in sets]
with open(sys.argv[1], "w") as f:
    for group in zip(*rows):
        for r in group:
            f.write(json.dumps({"turns": r["turns"]}) + "\n")
