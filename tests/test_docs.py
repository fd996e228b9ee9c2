"""The manual covers the CLI: every verb of `aiayn --help` and every option of each verb's
`--help` appears in the README or a page of docs/ (what the README documented before it became a
front page is not lost), and the README stays a front page."""

import re

import pytest

from aiayn.builder.cli import VERBS, verb_parser
from tests.conftest import ROOT
from tests.test_readme import README, manual


def options(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][\w-]*", help_text)) - {"--help"}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_and_option_is_documented(verb):
    text = manual() + manual(separate=True)
    assert f"aiayn {verb}" in text
    undocumented = sorted(o for o in options(verb_parser(verb).format_help()) if not re.search(re.escape(o) + r"(?![\w-])", text))
    assert undocumented == [], f"aiayn {verb}: not in the README or docs/: {undocumented}"


def test_the_readme_is_a_front_page_that_links_every_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", text))
    assert pages - linked == set(), f"pages the README does not link: {sorted(pages - linked)}"
