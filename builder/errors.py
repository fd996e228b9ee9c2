"""The one exception type for errors a user can cause (bad YAML, bad data, a wrong path).

The CLI prints its message and exits with code 2; anything else escaping is our bug.
"""


class UserError(Exception):
    """An error the user can fix; its message says what is wrong and how to fix it."""

    exit_code = 2
