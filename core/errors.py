"""The one error type users see: a single line that says what is wrong and how to fix it."""


class TandemError(RuntimeError):
    """Shown to the user as one line (no traceback) by the CLI and the apps."""
