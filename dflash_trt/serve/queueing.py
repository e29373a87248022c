"""What a serving loop's engine thread takes from its request queue at a step boundary (Triton model, OpenAI runner)."""

from __future__ import annotations

import queue


def take_queued(q: queue.Queue, wait: bool) -> list:
    """Everything queued right now; with `wait` (nothing to run), sleep until the first item arrives."""
    items = [q.get()] if wait else []
    while True:
        try:
            items.append(q.get_nowait())
        except queue.Empty:
            return items
