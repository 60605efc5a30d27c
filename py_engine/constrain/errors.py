"""The error of constrained decoding: a schema we cannot enforce, or a token the grammar refuses."""

from ..errors import WispError


class ConstraintError(WispError):
    """An unsupported or unsatisfiable response_format / schema (named by keyword and path), or a token
    that the constraint does not allow."""
