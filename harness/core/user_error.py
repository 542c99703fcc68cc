"""The command line's one error for a user's mistake, shared by the command modules."""


class UserError(Exception):
    """A mistake in the command line or its inputs: printed without a traceback."""
