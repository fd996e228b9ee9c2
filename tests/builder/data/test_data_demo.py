"""builder.data.demo: the generated English-German corpus."""

import pytest

from aiayn.builder.data.demo import (
    ADVERBS,
    MATRIX_CLAUSES,
    NOUNS,
    SUBJECTS,
    VERBS,
    Parts,
    capacity,
    generate_demo,
    number_de,
    number_en,
    translate,
    write_demo,
)
from aiayn.builder.errors import UserError


def parts(subject: str, verb: str, noun: str, n: int, adverb: int = 0, matrix: int = 0) -> Parts:
    return Parts(
        subject=next(s for s in SUBJECTS if s.en == subject),
        verb=next(v for v in VERBS if v.en_past == verb),
        noun=next(x for x in NOUNS if x.en_sg == noun),
        n=n,
        adverb=ADVERBS[adverb],
        matrix=MATRIX_CLAUSES[matrix],
    )


@pytest.mark.parametrize(
    ("n", "en", "de"),
    [
        (1, "one", "eins"),
        (7, "seven", "sieben"),
        (17, "seventeen", "siebzehn"),
        (21, "twenty-one", "einundzwanzig"),
        (30, "thirty", "dreißig"),
        (100, "one hundred", "einhundert"),
        (321, "three hundred twenty-one", "dreihunderteinundzwanzig"),
        (999, "nine hundred ninety-nine", "neunhundertneunundneunzig"),
    ],
)
def test_numbers(n, en, de):
    assert (number_en(n), number_de(n)) == (en, de)


@pytest.mark.parametrize(
    ("template", "p", "en", "de"),
    [
        (
            0,
            parts("she", "bought", "book", 321),
            "she bought three hundred twenty-one books",
            "sie kaufte dreihunderteinundzwanzig Bücher",
        ),
        (3, parts("he", "sold", "car", 7), "i know that he sold seven cars", "ich weiß, dass er sieben Autos verkaufte"),
        # verb number agreement: sie kaufte (she) / sie kauften (they); strong verbs too
        (0, parts("they", "bought", "apple", 12), "they bought twelve apples", "sie kauften zwölf Äpfel"),
        (0, parts("the children", "saw", "house", 40), "the children saw forty houses", "die Kinder sahen vierzig Häuser"),
        # the accusative "one" takes the noun's gender
        (0, parts("i", "found", "dog", 1), "i found one dog", "ich fand einen Hund"),
        (0, parts("i", "found", "cat", 1), "i found one cat", "ich fand eine Katze"),
        (0, parts("i", "found", "picture", 1), "i found one picture", "ich fand ein Bild"),
        # perfect: auxiliary second, participle last; haben agrees with the subject
        (1, parts("i", "painted", "chair", 2), "i have painted two chairs", "ich habe zwei Stühle gemalt"),
        (
            1,
            parts("my sister", "carried", "bottle", 1),
            "my sister has carried one bottle",
            "meine Schwester hat eine Flasche getragen",
        ),
        (1, parts("we", "counted", "ball", 55), "we have counted fifty-five balls", "wir haben fünfundfünfzig Bälle gezählt"),
        # a fronted adverb puts the verb before the subject
        (
            2,
            parts("the teacher", "ordered", "table", 300, adverb=1),
            "last year the teacher ordered three hundred tables",
            "letztes Jahr bestellte der Lehrer dreihundert Tische",
        ),
        # subordinate perfect: participle, then the auxiliary, at the very end
        (
            4,
            parts("they", "sold", "flower", 1, matrix=1),
            "he said that they have sold one flower",
            "er sagte, dass sie eine Blume verkauft haben",
        ),
    ],
)
def test_golden_pairs(template, p, en, de):
    assert translate(template, p) == (en, de)


def test_deterministic_for_a_seed_and_different_for_another():
    a = generate_demo(200, 20, 20, seed=3)
    assert a == generate_demo(200, 20, 20, seed=3)
    assert a != generate_demo(200, 20, 20, seed=4)


def test_golden_first_pairs_of_seed_1234():
    data = generate_demo(3, 1, 1, seed=1234)
    assert list(zip(*data["train"])) == [
        ("the children sold one book", "die Kinder verkauften ein Buch"),
        ("he said that he has ordered one cat", "er sagte, dass er eine Katze bestellt hat"),
        ("the children carried three dogs", "die Kinder trugen drei Hunde"),
    ]


def test_splits_sizes_aligned_and_disjoint():
    data = generate_demo(3000, 300, 300, seed=0)
    assert {k: (len(en), len(de)) for k, (en, de) in data.items()} == {
        "train": (3000, 3000),
        "valid": (300, 300),
        "test": (300, 300),
    }
    pairs = {k: set(zip(en, de)) for k, (en, de) in data.items()}
    assert sum(map(len, pairs.values())) == 3600  # distinct within and across splits
    assert not pairs["train"] & pairs["valid"] and not pairs["train"] & pairs["test"]


def test_sentences_are_short_and_varied():
    en, de = generate_demo(2000, 1, 1, seed=0)["train"]
    assert max(len(s.split()) for s in en) <= 12 and max(len(s.split()) for s in de) <= 10
    assert sum(s.startswith(("yesterday", "last")) for s in en) > 200
    assert sum(", dass " in s for s in de) > 500
    assert sum(" one " in f" {s} " for s in en) > 30


def test_no_number_ending_in_eins_before_a_noun():
    _, de = generate_demo(5000, 1, 1, seed=0)["train"]
    assert not [s for s in de if "eins " in s]


def test_capacity():
    assert capacity() == 8 * 8 * 12 * 990 * 11


def test_bad_sizes():
    with pytest.raises(UserError) as e:
        generate_demo(10, 0, 10, seed=0)
    assert str(e.value) == "demo corpus: n_valid must be at least 1, got 0"
    with pytest.raises(UserError, match=r"= 5000000 is more than the 4181760 distinct pairs"):
        generate_demo(4_000_000, 500_000, 500_000, seed=0)


def test_write_demo(tmp_path):
    paths = write_demo(tmp_path, n_train=5, n_valid=2, n_test=2, seed=1)
    assert paths["valid"] == (tmp_path / "valid.en", tmp_path / "valid.de")
    en, de = generate_demo(5, 2, 2, seed=1)["train"]
    assert (tmp_path / "train.en").read_text(encoding="utf-8") == "".join(s + "\n" for s in en)
    assert (tmp_path / "train.de").read_text(encoding="utf-8") == "".join(s + "\n" for s in de)
    mtime = (tmp_path / "test.de").stat().st_mtime_ns
    write_demo(tmp_path, n_train=5, n_valid=2, n_test=2, seed=1)  # same text: files untouched
    assert (tmp_path / "test.de").stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test.de", "test.en", "train.de", "train.en", "valid.de", "valid.en"]
