"""The built-in English-German corpus of the embedded demo: generated, so it needs no download.

A small but real translation problem: numbers written out in words ("three hundred twenty-one"
-> "dreihunderteinundzwanzig": units before tens, one compound word), German verb-second order
after a fronted adverb, verb-final subordinate clauses, the perfect's split auxiliary and
participle, verb number agreement, and the gender of the accusative article ("einen Hund",
"eine Katze", "ein Buch"). English is lower-case without final punctuation; German capitalises
nouns only, as in "ich weiß, dass er sieben Autos verkaufte".
"""

import functools
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from num2words import num2words

from aiayn.builder.errors import UserError
from aiayn.builder.run.atomic import write_bytes_atomic

SPLITS = ("train", "valid", "test")


class Subject(NamedTuple):
    en: str
    de: str
    number: str  # sg or pl: the German past tense agrees in number only (ich/er kaufte, wir/sie kauften)
    en_have: str
    de_have: str

    @property
    def plural(self) -> bool:
        return self.number == "pl"


class Verb(NamedTuple):
    en_past: str
    en_participle: str
    de_past_sg: str
    de_past_pl: str
    de_participle: str


class Noun(NamedTuple):
    en_sg: str
    en_pl: str
    de_sg: str
    de_pl: str
    de_one: str  # accusative "one"/"a": einen (masculine), eine (feminine), ein (neuter)


def _table(row: Callable[..., Any], text: str) -> tuple[Any, ...]:
    """One `row(*fields)` per line of `text`, fields separated by "|"."""
    return tuple(row(*(field.strip() for field in line.split("|"))) for line in text.strip().splitlines())


SUBJECTS: tuple[Subject, ...] = _table(
    Subject,
    """
    i            | ich             | sg | have | habe
    he           | er              | sg | has  | hat
    she          | sie             | sg | has  | hat
    we           | wir             | pl | have | haben
    they         | sie             | pl | have | haben
    the teacher  | der Lehrer      | sg | has  | hat
    my sister    | meine Schwester | sg | has  | hat
    the children | die Kinder      | pl | have | haben
""",
)
VERBS: tuple[Verb, ...] = _table(
    Verb,
    """
    bought  | bought  | kaufte    | kauften    | gekauft
    sold    | sold    | verkaufte | verkauften | verkauft
    saw     | seen    | sah       | sahen      | gesehen
    found   | found   | fand      | fanden     | gefunden
    counted | counted | zählte    | zählten    | gezählt
    ordered | ordered | bestellte | bestellten | bestellt
    painted | painted | malte     | malten     | gemalt
    carried | carried | trug      | trugen     | getragen
""",
)
NOUNS: tuple[Noun, ...] = _table(
    Noun,
    """
    book    | books    | Buch    | Bücher    | ein
    car     | cars     | Auto    | Autos     | ein
    dog     | dogs     | Hund    | Hunde     | einen
    cat     | cats     | Katze   | Katzen    | eine
    apple   | apples   | Apfel   | Äpfel     | einen
    chair   | chairs   | Stuhl   | Stühle    | einen
    table   | tables   | Tisch   | Tische    | einen
    flower  | flowers  | Blume   | Blumen    | eine
    house   | houses   | Haus    | Häuser    | ein
    bottle  | bottles  | Flasche | Flaschen  | eine
    ball    | balls    | Ball    | Bälle     | einen
    picture | pictures | Bild    | Bilder    | ein
""",
)
ADVERBS = (("yesterday", "gestern"), ("last year", "letztes Jahr"), ("last week", "letzte Woche"))
MATRIX_CLAUSES = (("i know that", "ich weiß"), ("he said that", "er sagte"), ("we think that", "wir denken"))

# 101, 201, ... are left out: before a noun German inflects their final "eins" ("hundertein
# Bücher", "hundertundein Buch") and usage varies, so no single reference would be right.
# The three magnitudes are drawn equally often, so small numbers and "one" are well represented.
MAGNITUDES = (
    tuple(range(1, 10)),
    tuple(range(10, 100)),
    tuple(n for n in range(100, 1000) if n % 100 != 1),
)


@functools.cache
def number_en(n: int) -> str:
    """American style, without "and": 321 -> "three hundred twenty-one"."""
    return num2words(n, lang="en").replace(" and ", " ")


@functools.cache
def number_de(n: int) -> str:
    """321 -> "dreihunderteinundzwanzig"."""
    return num2words(n, lang="de")


class Parts(NamedTuple):
    subject: Subject
    verb: Verb
    noun: Noun
    n: int
    adverb: tuple[str, str]
    matrix: tuple[str, str]

    @property
    def object_en(self) -> str:
        return f"one {self.noun.en_sg}" if self.n == 1 else f"{number_en(self.n)} {self.noun.en_pl}"

    @property
    def object_de(self) -> str:
        if self.n == 1:
            return f"{self.noun.de_one} {self.noun.de_sg}"
        return f"{number_de(self.n)} {self.noun.de_pl}"

    @property
    def past_de(self) -> str:
        return self.verb.de_past_pl if self.subject.plural else self.verb.de_past_sg


def _past(p: Parts) -> tuple[str, str]:
    s, v = p.subject, p.verb
    return f"{s.en} {v.en_past} {p.object_en}", f"{s.de} {p.past_de} {p.object_de}"


def _perfect(p: Parts) -> tuple[str, str]:
    s, v = p.subject, p.verb
    return (
        f"{s.en} {s.en_have} {v.en_participle} {p.object_en}",
        f"{s.de} {s.de_have} {p.object_de} {v.de_participle}",
    )


def _adverb_past(p: Parts) -> tuple[str, str]:  # verb second: the subject follows the verb
    (adv_en, adv_de), s, v = p.adverb, p.subject, p.verb
    return f"{adv_en} {s.en} {v.en_past} {p.object_en}", f"{adv_de} {p.past_de} {s.de} {p.object_de}"


def _that_past(p: Parts) -> tuple[str, str]:  # subordinate clause: the verb goes last
    (m_en, m_de), s, v = p.matrix, p.subject, p.verb
    return f"{m_en} {s.en} {v.en_past} {p.object_en}", f"{m_de}, dass {s.de} {p.object_de} {p.past_de}"


def _that_perfect(p: Parts) -> tuple[str, str]:
    (m_en, m_de), s, v = p.matrix, p.subject, p.verb
    return (
        f"{m_en} {s.en} {s.en_have} {v.en_participle} {p.object_en}",
        f"{m_de}, dass {s.de} {p.object_de} {v.de_participle} {s.de_have}",
    )


TEMPLATES: tuple[Callable[[Parts], tuple[str, str]], ...] = (
    _past,
    _perfect,
    _adverb_past,
    _that_past,
    _that_perfect,
)


def translate(template: int, parts: Parts) -> tuple[str, str]:
    """The (English, German) pair of `TEMPLATES[template]` filled with `parts`."""
    return TEMPLATES[template](parts)


def capacity() -> int:
    """How many distinct pairs the templates can make (adverb/matrix unused by some templates)."""
    numbers = sum(len(m) for m in MAGNITUDES)
    core = len(SUBJECTS) * len(VERBS) * len(NOUNS) * numbers
    return core * (2 + len(ADVERBS) + 2 * len(MATRIX_CLAUSES))


def _sample(rng: random.Random) -> tuple[str, str]:
    parts = Parts(
        subject=rng.choice(SUBJECTS),
        verb=rng.choice(VERBS),
        noun=rng.choice(NOUNS),
        n=rng.choice(rng.choice(MAGNITUDES)),
        adverb=rng.choice(ADVERBS),
        matrix=rng.choice(MATRIX_CLAUSES),
    )
    return translate(rng.randrange(len(TEMPLATES)), parts)


def generate_demo(n_train: int, n_valid: int, n_test: int, seed: int) -> dict[str, tuple[list[str], list[str]]]:
    """{"train"|"valid"|"test": (English lines, German lines)}, the same for the same arguments.

    The pairs are distinct, so no held-out pair occurs in the training split.
    """
    sizes = {"train": n_train, "valid": n_valid, "test": n_test}
    for split, n in sizes.items():
        if n < 1:
            raise UserError(f"demo corpus: n_{split} must be at least 1, got {n}")
    total, limit = sum(sizes.values()), capacity() // 2
    if total > limit:
        raise UserError(
            f"demo corpus: n_train + n_valid + n_test = {total} is more than the {limit} distinct "
            f"pairs the generator can draw without mostly repeating itself; ask for fewer"
        )
    rng = random.Random(seed)
    seen: set[str] = set()
    pairs: list[tuple[str, str]] = []
    while len(pairs) < total:
        en, de = _sample(rng)
        if en not in seen:  # German is a function of English, so distinct English = distinct pairs
            seen.add(en)
            pairs.append((en, de))
    out, start = {}, 0
    for split, n in sizes.items():
        chunk = pairs[start : start + n]
        out[split] = ([en for en, _ in chunk], [de for _, de in chunk])
        start += n
    return out


def write_demo(directory: Path, *, n_train: int, n_valid: int, n_test: int, seed: int) -> dict[str, tuple[Path, Path]]:
    """Writes `{split}.en` / `{split}.de` under `directory`; returns {split: (en path, de path)}.

    A file that already holds the same text is left untouched (its mtime too), so concurrent
    trials sharing the directory neither race nor invalidate anything.
    """
    directory = Path(directory)
    paths = {}
    for split, (en, de) in generate_demo(n_train, n_valid, n_test, seed).items():
        paths[split] = (directory / f"{split}.en", directory / f"{split}.de")
        for path, lines in zip(paths[split], (en, de)):
            data = "".join(line + "\n" for line in lines).encode("utf-8")
            if not path.is_file() or path.read_bytes() != data:
                write_bytes_atomic(path, data)
    return paths
