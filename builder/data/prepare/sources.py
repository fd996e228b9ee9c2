"""Reading the downloaded files of a corpus (`--from FOLDER`): plain or gzipped text, members of
the statmt.org .tgz archives read in place with tarfile (nothing is extracted), and the
`<seg>` lines of WMT's SGM test sets. Lines are streamed: a 4.5M-pair corpus is never in memory.
"""

import gzip
import re
import tarfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import IO, cast

from aiayn.builder.errors import UserError

# One segment per line, as WMT writes them: <seg id="1">text</seg>. The text is taken as
# sacreBLEU takes it for its references (no unescaping; whitespace stripped and collapsed).
SEG = re.compile(r"<seg[^>]*>(.*)</seg>")


@dataclass(frozen=True)
class Place:
    """Where a file of a corpus may be: `path` inside `archive` (a file in --from), or, with no
    archive, `path` under --from (also tried with ".gz")."""

    path: str
    archive: str | None = None

    def __str__(self) -> str:
        return f"{self.archive}:{self.path}" if self.archive else self.path


@dataclass(frozen=True)
class Found:
    """A file located under --from: a plain/gzipped file, or a member of an archive."""

    file: Path
    member: str | None = None
    sgm: bool = False

    def __str__(self) -> str:
        return f"{self.file}:{self.member}" if self.member else str(self.file)

    @contextmanager
    def open(self) -> Iterator[IO[bytes]]:
        if self.member is None:
            with gzip.open(self.file, "rb") if self.file.suffix == ".gz" else open(self.file, "rb") as f:
                yield cast(IO[bytes], f)
            return
        with tarfile.open(self.file, "r:*") as tar:
            member = tar.extractfile(find_member(tar, self.member, self.file))
            if member is None:  # a directory or a link, not a file
                raise UserError(f"{self.file}: {self.member} is not a file in the archive")
            if self.member.endswith(".gz"):  # a gzipped file in a tar (training-giga-fren.tar's)
                with gzip.GzipFile(fileobj=member) as unzipped:
                    yield cast(IO[bytes], unzipped)
                return
            yield member


def find_member(tar: tarfile.TarFile, name: str, archive: Path) -> tarfile.TarInfo:
    """The member `name` (a leading "./" ignored), reading the archive only as far as it."""
    for member in tar:
        if member.isfile() and member.name.removeprefix("./") == name:
            return member
    raise UserError(f"{archive} has no {name}; is it the archive statmt.org publishes under that name?")


def locate(folder: Path, places: Sequence[Place], *, sgm: bool = False) -> Found | None:
    """The first of `places` that exists under `folder`. An archive counts when it is there (its
    members are checked when read: listing a .tgz means decompressing it)."""
    for place in places:
        if place.archive is not None:
            if (folder / place.archive).is_file():
                return Found(folder / place.archive, place.path, sgm)
            continue
        for candidate in (folder / place.path, folder / f"{place.path}.gz"):
            if candidate.is_file():
                return Found(candidate, None, sgm)
    return None


def read_lines(found: Found) -> Iterator[str]:
    """The sentences of a file without line endings (split on "\\n" only, as builder.data.corpus
    reads them; a trailing "\\r" and a UTF-8 byte-order mark are dropped); of an SGM file, the
    text of its <seg> lines. A damaged download (a truncated or corrupt .gz or .tgz) is a UserError."""
    try:
        yield from _lines(found)
    except (OSError, EOFError, zlib.error, tarfile.TarError) as e:  # gzip.BadGzipFile is an OSError
        reason = " ".join(str(e).split()) or type(e).__name__
        raise UserError(f"{found} cannot be read ({reason}); is the download whole? download it again") from None


def _lines(found: Found) -> Iterator[str]:
    with found.open() as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UserError(
                    f"{found}, line {number}: invalid UTF-8 (byte 0x{raw[exc.start]:02x}); is the file intact?"
                ) from None
            line = line.removesuffix("\n").removesuffix("\r")
            if number == 1:
                line = line.removeprefix("\ufeff")
            if not found.sgm:
                yield line
            elif line.startswith("<seg ") and (match := SEG.match(line)):
                yield re.sub(r"\s+", " ", match.group(1).strip())


def read_pairs(src: Found, tgt: Found) -> Iterator[tuple[str, str]]:
    """Line N of `src` with line N of `tgt`; two files of different lengths are an error."""
    for number, (s, t) in enumerate(zip_longest(read_lines(src), read_lines(tgt)), 1):
        if s is None or t is None:
            longer, shorter = (src, tgt) if t is None else (tgt, src)
            raise UserError(
                f"{shorter} ends at line {number - 1} but {longer} goes on: the two sides of a "
                f"parallel corpus must have the same number of lines; is one of them truncated?"
            )
        yield s, t


def chain_pairs(parts: Iterable[tuple[Found, Found]]) -> Iterator[tuple[str, str]]:
    for src, tgt in parts:
        yield from read_pairs(src, tgt)
