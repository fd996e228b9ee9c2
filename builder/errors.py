"""The one exception type for errors a user can cause (bad YAML, bad data, a wrong path).

The CLI prints its message and exits with code 2; anything else escaping is our bug. The Python
API checks its arguments with `path_argument`, `strings_argument` and `bool_argument`, so a wrong type is a
UserError naming the argument, not an exception from deep inside.
"""

import os
import re
import shlex
import unicodedata
from collections.abc import Iterable
from os import PathLike
from pathlib import Path


class UserError(Exception):
    """An error the user can fix; its message says what is wrong and how to fix it. `setting`: a
    setting the message names in parentheses by its Python name, as the API and the server take
    it (`max_input_len`); the command line says its flag instead (`command_line`)."""

    exit_code = 2

    def __init__(self, message: str, *, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting

    def command_line(self) -> str:
        """The message as a command says it: the setting by its flag (`--max-input-len`)."""
        if self.setting is None:
            return str(self)
        return str(self).replace(f"({self.setting})", f"(--{self.setting.replace('_', '-')})")


class BlockError(UserError):
    """A block that failed to build from a validated spec: our bug (or a plugin's), reported in
    one line that names the block, with its own exit code (sysexits' EX_SOFTWARE)."""

    exit_code = 70


def described(value: object) -> str:
    """A value as a message names it: its type, and a short repr."""
    text = repr(value)
    return "None" if value is None else f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def path_argument(value: object, name: str) -> Path:
    """`value` as a path, or a UserError naming the argument `name`."""
    if isinstance(value, (str, PathLike)) and str(value):
        return Path(value)
    raise UserError(f"{name}: expected a path (a str or pathlib.Path), got {described(value)}")


def strings_argument(value: object, name: str, *, one: bool = False) -> list[str]:
    """`value` as a list of str (`one`: a single str is a list of one), or a UserError naming
    the argument `name` (and the index of an item that is not a str)."""
    if isinstance(value, str):
        if one:
            return [value]
        raise UserError(f"{name}: expected a list of strings, got the string {value!r}; wrap it in a list: [{value!r}]")
    if not isinstance(value, Iterable) or isinstance(value, (bytes, dict)):
        raise UserError(f"{name}: expected a list of strings, got {described(value)}")
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise UserError(f"{name}[{i}]: expected a string, got {described(item)}")
    return items


def bool_argument(value: object, name: str) -> bool:
    """`value` as a flag, or a UserError naming the argument `name` ("yes" or 1 is no flag)."""
    if isinstance(value, bool):
        return value
    raise UserError(f"{name}: expected True or False, got {described(value)}")


def bool_arguments(**flags: object) -> tuple[bool, ...]:
    """Each keyword's value as a flag (`bool_argument`), in order."""
    return tuple(bool_argument(value, name) for name, value in flags.items())


def resolved(path: str | PathLike[str]) -> Path:
    """`path` made absolute with its symbolic links followed, or a UserError where a link on the
    way leads back to itself (pathlib raises RuntimeError for that before Python 3.13, OSError since)
    or a name in it is longer than the filesystem allows."""
    check_name_lengths(path)
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError):
        raise UserError(loop_message(path)) from None


def check_input_file(path: Path, flag: str) -> None:
    """A UserError naming `flag` where `path` is not a file to read: missing, a folder, or a link that loops."""
    if path.is_file():
        return
    resolved(path)  # a link that leads back to itself is named as one
    raise UserError(f"{flag} {path}: {'is a folder; give a text file' if path.is_dir() else 'no such file'}")


NAME_MAX, PATH_MAX = 255, 4095  # bytes: Linux's limits on a file's name and on a path


def check_name_lengths(path: str | PathLike[str], what: str = "") -> None:
    """A UserError where a name in `path`, or the whole of it, is longer than a filesystem takes
    (an OSError, "File name too long", from whatever touched it first)."""
    shown = str(path) if len(str(path)) <= 80 else f"{str(path)[:60]}...{str(path)[-16:]}"
    prefix = f"{what} {shown}" if what else shown
    longest = max((len(os.fsencode(part)) for part in Path(path).parts), default=0)
    if longest > NAME_MAX:
        raise UserError(f"{prefix}: a name in it is {longest} bytes long, and a file name may have {NAME_MAX}; shorten it")
    if len(os.fsencode(os.fspath(path))) > PATH_MAX:
        raise UserError(
            f"{prefix}: the path is {len(os.fsencode(os.fspath(path)))} bytes long, and may have {PATH_MAX}; shorten it"
        )


def loop_message(path: object) -> str:
    return (
        f"{path}: a symbolic link on the way to it leads back to itself (a loop); point it at a real file or folder, or remove it"
    )


def printable(text: str) -> str:
    """`text` with every control or format character (an escape sequence, a newline, a bidi
    override) written as its escape, so that text read from a file prints as one inert line."""
    return "".join(repr(c)[1:-1] if unicodedata.category(c)[0] == "C" else c for c in text)


# what pip installs: a distribution's name and version as the run recorded them (name==version)
INSTALLABLE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?==[A-Za-z0-9][A-Za-z0-9.+!_-]*")


def missing_plugins_message(path: str | Path, missing: dict[str, str]) -> str:
    """Which recorded types no installed plugin registers, and the pip line that installs their
    distributions, quoted for a shell; a record that names no distribution pip can install (the
    checkpoint's data, not to be run) is printed inert and not offered as a command."""
    dists = sorted(set(missing.values()))
    types = ", ".join(f"'{printable(t)}'" for t in missing)
    shown = " and ".join(printable(d) for d in dists)
    bad = [d for d in dists if not INSTALLABLE.fullmatch(d)]
    if bad:
        return (
            f"{path} was trained with {types} of {shown}, which is not installed here; its record '{printable(bad[0])}' names "
            "no distribution pip can install (name==version): install the plugin that registers those types"
        )
    return f"{path} was trained with {types} of {shown}, which is not installed here: pip install {' '.join(map(shlex.quote, dists))}"
