"""Text that names the protocol variants tells the truth about the variant table
(``emulator.VARIANT_NAMES``, ``emulator.quorum.variants.QUORUM_VARIANT_NAMES``).

The project's rule is that such text is generated from the table; where prose names variants by
hand, this test holds it to the table: no name the table lacks; a list offered as every choice
(``hw|…|all``) or, on the front door (README, pyproject, ``--help``, the main job's script), any
list of three or more, names a whole family; a count of "the variants" is the table's; the
README's variant table lists exactly the table; pyproject's static description names none."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from emulator import VARIANT_NAMES
from emulator.quorum.variants import QUORUM_VARIANT_NAMES

ROOT = Path(__file__).resolve().parent.parent
PARTITION, QUORUM = set(VARIANT_NAMES), set(QUORUM_VARIANT_NAMES)
WHOLE = (PARTITION, QUORUM, PARTITION | QUORUM)

NAME = r"`?(?:hw|kip\d{3}|kraft\d{3}|all)`?"
KIP = r"KIP-\d{3}|HW truncation"
SEP = r"(?:\s*,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+|\||/)"
NAME_RUN = re.compile(rf"(?<![\w-]){NAME}(?:{SEP}{NAME})+(?![\w-])")
KIP_RUN = re.compile(rf"(?:{KIP})(?:{SEP}(?:{KIP}))+")
UNKNOWN = re.compile(r"(?<![\w])(?:kip|kraft)\d{3}(?![\w])")
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
           "ten": 10, "eleven": 11, "twelve": 12}
COUNT = re.compile(r"\b(all |the )?(" + "|".join(NUMBERS) + r"|\d+) (?:protocol |partition )?variants\b", re.I)


def names_of(run: str) -> list[str]:
    return re.findall(r"hw|kip\d{3}|kraft\d{3}|all", run)


def kip_names(run: str) -> list[str] | None:
    """The variants a run like "HW truncation, KIP-101, KIP-279" names (None: a KIP no variant is)."""
    names = []
    for ref in re.findall(KIP, run):
        if ref == "HW truncation":
            names.append("hw")
            continue
        number = ref.split("-")[1]
        name = next((n for n in (f"kip{number}", f"kraft{number}") if n in PARTITION | QUORUM), None)
        if name is None:
            return None
        names.append(name)
    return names


def help_texts() -> str:
    import argparse

    from replemu import cli

    parser = cli.build_parser()
    texts = [parser.format_help(), cli.__doc__ or ""]
    for action in parser._actions:  # the sub-commands' own --help
        if isinstance(action, argparse._SubParsersAction):
            texts += [sub.format_help() for sub in action.choices.values()]
    return "\n".join(texts)


def description() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["description"]


FRONT = {
    "README.md": lambda: (ROOT / "README.md").read_text(encoding="utf-8"),
    "pyproject.toml description": description,
    "scripts/main.sh": lambda: (ROOT / "scripts" / "main.sh").read_text(encoding="utf-8"),
    "replemu --help": help_texts,
}
DOCS = {f"docs/{p.name}": (lambda p=p: p.read_text(encoding="utf-8")) for p in sorted((ROOT / "docs").glob("*.md"))}


def problems(text: str, front: bool) -> list[str]:
    found = [f"names {m!r}, which is no variant of the table" for m in UNKNOWN.findall(text)
             if m not in PARTITION | QUORUM]
    for match in NAME_RUN.finditer(text):
        names = names_of(match.group())
        listed = set(names) - {"all"}
        offered_as_all = "all" in names and "|" in match.group()
        if (offered_as_all or (front and len(listed) >= 3)) and listed not in WHOLE:
            missing = sorted(next((w for w in WHOLE if listed <= w), PARTITION | QUORUM) - listed)
            found.append(f"{match.group()!r} lists a part of a family as if it were all of it (missing: {missing})")
    if front:
        for match in KIP_RUN.finditer(text):
            names = kip_names(match.group())
            if names is not None and len(names) >= 3 and set(names) not in WHOLE:
                found.append(f"{match.group()!r} lists a part of the variants as if it were all of them")
    for match in COUNT.finditer(text):
        said = match.group(2).lower()
        number = NUMBERS.get(said) or int(said)
        if number != len(VARIANT_NAMES):
            found.append(f"{match.group()!r}: the table has {len(VARIANT_NAMES)} partition variants")
    return found


@pytest.mark.parametrize("where", list(FRONT) + list(DOCS))
def test_text_names_the_variants_of_the_table(where):
    text = (FRONT | DOCS)[where]()
    found = problems(text, front=where in FRONT)
    assert not found, f"{where}: " + "; ".join(found) + " (generate the list from emulator.VARIANT_NAMES or name none)"


def test_the_readme_variant_table_is_the_table():
    """Its rows are generated from emulator.variants.VARIANT_DOCS (scripts/variant_table.py), which
    has one entry per variant of the table."""
    from conftest import load_script

    script = load_script("variant_table")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w]+)` \|", readme, flags=re.M)
    assert tuple(rows) == VARIANT_NAMES, f"README's variant table lists {rows}, the table is {list(VARIANT_NAMES)}"
    assert script.rewritten(readme) == readme, "README's variant table is stale: run python scripts/variant_table.py"


def test_pyprojects_description_names_no_variant():
    text = description()
    assert not re.search(rf"{NAME}|{KIP}", text), f"pyproject's description names variants by hand: {text!r}"


@pytest.mark.parametrize("stale, why", [
    ("Kafka replication emulator (HW truncation, KIP-101, KIP-279, KIP-320)", "part of the variants"),
    ("--protocol hw|kip101|kip279|kip320|all", "missing: ['kip903', 'kip966']"),
    ("every bundled scenario under hw, kip101, kip279, kip320", "missing"),
    ("streams them under all four protocol variants", "partition variants"),
    ("replay it under kip321", "no variant of the table"),
])
def test_stale_lists_are_caught(stale, why):
    assert any(why in p for p in problems(stale, front=True)), problems(stale, front=True)


def test_the_main_job_reads_the_variants_from_the_table():
    """scripts/main.sh streams `--protocol all` (every partition variant) and prints each one's
    results: its headings and its results loop take the names from the table, none typed."""
    script = (ROOT / "scripts" / "main.sh").read_text(encoding="utf-8")
    typed = re.findall(r"(?<![\w-])(?:hw|kip\d{3}|kraft\d{3})(?![\w-])", script)
    assert not typed, f"scripts/main.sh types variant names: {typed}"
    assert "emulator.VARIANT_NAMES" in script and re.search(r"^for p in \$VARIANTS; do$", script, re.M)
