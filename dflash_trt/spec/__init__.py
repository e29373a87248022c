"""The speculative-decoding algorithm: sampling rule, acceptance, statistics."""
