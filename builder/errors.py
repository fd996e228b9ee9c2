"""The one exception type for errors a user can cause (bad YAML, bad data, a wrong path).

The CLI prints its message and exits with code 2; anything else escaping is our bug.
"""


class UserError(Exception):
    """An error the user can fix; its message says what is wrong and how to fix it."""

    exit_code = 2


class BlockError(UserError):
    """A block that failed to build from a validated spec: our bug (or a plugin's), reported in
    one line that names the block, with its own exit code (sysexits' EX_SOFTWARE)."""

    exit_code = 70
