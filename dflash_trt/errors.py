"""One exception family for bad input.

Every message names the offending field (or file) and says how to fix it, so the CLI can print it as one line
instead of a traceback from deep inside torch.
"""


class DFlashError(Exception):
    """Base class: bad input the user can fix."""


class CheckpointError(DFlashError):
    """A checkpoint directory is missing, corrupt, or does not match its config / its partner model."""


class ConfigError(DFlashError):
    """A configuration value is out of range or unsupported."""


class RequestError(DFlashError):
    """A generation request (prompt, sampling parameters) is invalid."""


class GenerationError(DFlashError):
    """Generation failed for a request that was valid (a fault inside the step: the message carries its cause). The
    engines report it per request (Result.error); callers that need every output, like the build's gate, raise it."""


class DeprecatedOption(FutureWarning):
    """An option given under an old name: still works, warns (shown by default; the CLI prints it as one line)."""
