"""Stop strings and streamed text (pure functions; the engine thread applies them to each request's decoded text).

A stop string ends a request where the generated text first contains it; the text is cut before it. While streaming,
nothing past a stop string may be sent, so a tail of the text that could be the start of a stop string is held back
until the next tokens decide it, and so is a trailing U+FFFD (a token that ends inside a UTF-8 sequence decodes to
it until the rest of the character arrives).
"""

from __future__ import annotations

from collections.abc import Sequence

REPLACEMENT_CHAR = "\ufffd"


def find_stop(text: str, stops: Sequence[str]) -> int | None:
    """Where the first stop string starts in text (the earliest occurrence of any of them), or None."""
    hits = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(hits) if hits else None


def holdback(text: str, stops: Sequence[str]) -> int:
    """How many trailing characters of text could be the start of a stop string (the longest suffix of text that is a
    proper prefix of one): they may not be sent yet."""
    best = 0
    for stop in stops:
        for k in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:k]):
                best = k
                break
    return best


def visible_text(text: str, stops: Sequence[str], finished: bool) -> tuple[str, bool]:
    """(the part of the decoded text that may be sent now, whether a stop string ended it).

    With a stop string in text: the text before the first one, and True. Otherwise, for a finished request the whole
    text; for a running one the text without a trailing U+FFFD (an incomplete character) and without a tail that may
    start a stop string."""
    at = find_stop(text, stops)
    if at is not None:
        return text[:at], True
    if finished:
        return text, False
    stable = text.rstrip(REPLACEMENT_CHAR)
    return stable[: len(stable) - holdback(stable, stops)], False


class TextStream:
    """One streamed choice: feed it the whole decoded text after every step; it returns the new text to send."""

    def __init__(self, stops: Sequence[str] = ()):
        self.stops = [s for s in stops if s]
        self.sent = 0  # characters sent so far

    def update(self, text: str, finished: bool) -> tuple[str, bool]:
        """(delta, stopped): the text to send now (what became visible since the last update) and whether a stop
        string ends the request here. The decoded text of a longer output extends that of a shorter one (byte-level
        tokenizers; an incomplete character is held back), so the delta is the visible text past what was sent."""
        visible, stopped = visible_text(text, self.stops, finished)
        delta = visible[self.sent:]
        self.sent += len(delta)
        return delta, stopped
