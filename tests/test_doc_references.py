"""Every file, section and link the README, docs/ and ``--help`` point at exists in this
repository (issue 46 item 6): a mention of ``docs/run.md``, a ``§7.3`` or ``section 10.4`` of a
document, a quoted section title (``docs/explore.md "The metadata quorum"``), a Markdown link and
its ``#anchor``.  A section reference belongs to the last document named before it in its
sentence, else to the document it is in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

MD_FILE = re.compile(r"(?<![\w/.-])((?:\.\./|\./)?(?:[\w.-]+/)*[\w.-]+\.md)(?![\w/-])")
SECTION = re.compile(r"(?:§ ?|\bsection )((?:[A-Z]|\d+)(?:\.\d+)*)(?![\w])")
TITLE = re.compile(r"([\w.-]+\.md)`?,? \(?\"([^\"]+)\"")
LINK = re.compile(r"\]\(([^)\s]+)\)")
SENTENCE_END = re.compile(r"[.;](?=\s)")
# The files of the KIP-966 / KRaft TLA+ descriptions in Vanlightly/kafka-tlaplus that
# docs/protocol.md cites (at the commit it names): another repository's, not this one's.
EXTERNAL = {"5_recovery.md", "6_replication_correctness.md"}


def resolve(name: str, where: Path) -> Path | None:
    """The repository file a mention names: relative to the mentioning file, the root or docs/."""
    for base in (where.parent, ROOT, ROOT / "docs"):
        path = (base / name).resolve()
        if path.is_file() and (ROOT in path.parents):
            return path
    return None


def headings(path: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in path.read_text(encoding="utf-8").splitlines() if re.match(r"#{1,6} ", line)]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def has_section(path: Path, number: str) -> bool:
    return any(re.match(rf"{re.escape(number)}(?:\.? |\.?$)", h) for h in headings(path))


def named_sections(path: Path, sentence: str) -> dict[str, str]:
    """The numbered chapters (``## N.``) of ``path`` whose whole title is the words right before the
    parenthesis the reference stands in: ``the knobs (`docs/protocol.md` §8)`` names ``4. Knobs``."""
    tail = re.search(r"([\w -]+?) \((?:`?[\w./-]+\.md`?,? )?$", sentence)
    if not tail:
        return {}
    words = tail.group(1).lower().split()
    found = {}
    for h in headings(path):
        m = re.match(r"(\d+)\. (.+)", h)
        if m:
            title = re.split(r" \(", m.group(2))[0].strip().lower().split()
            if title and words[-len(title):] == title:
                found[m.group(1)] = h
    return found


def related(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def paragraphs(text: str) -> list[str]:
    return [" ".join(p.split("\n")) for p in re.split(r"\n\s*\n", text)]


def dangling(text: str, where: Path) -> list[str]:
    """What ``text`` (in ``where``) points at that does not exist."""
    problems = []
    for paragraph in paragraphs(text):
        for m in MD_FILE.finditer(paragraph):
            name = m.group(1)
            if Path(name).name not in EXTERNAL and resolve(name, where) is None:
                problems.append(f"{name}: no such file in the repository")
        for m in SECTION.finditer(paragraph):
            before = paragraph[:m.start()]
            ends = list(SENTENCE_END.finditer(before))
            sentence = before[ends[-1].end():] if ends else before
            named = MD_FILE.findall(sentence)
            if named and Path(named[-1]).name in EXTERNAL:
                continue
            target = resolve(named[-1], where) if named else where
            if target is None:
                continue  # reported above
            if not has_section(target, m.group(1)):
                problems.append(f"{m.group(0)} of {target.relative_to(ROOT)}: no such section "
                                f"(in: ...{sentence[-60:]}{m.group(0)})")
                continue
            named = named_sections(target, sentence)  # "knobs (`docs/protocol.md` §8)": §4 is "Knobs"
            if named and not any(related(number, m.group(1)) for number in named):
                problems.append(f"{m.group(0)} of {target.relative_to(ROOT)} is not {' or '.join(named.values())}, "
                                f"which the text names (in: ...{sentence[-60:]}{m.group(0)})")
        for name, title in TITLE.findall(paragraph):
            target = resolve(name, where)
            if target is not None and not any(title in h for h in headings(target)):
                problems.append(f'{name} "{title}": no such section')
        for link in LINK.findall(paragraph):
            if re.match(r"[a-z]+:", link):
                continue  # a URL
            file, _, anchor = link.partition("#")
            target = resolve(file, where) if file else where
            if target is None:
                problems.append(f"link {link}: no such file in the repository")
            elif anchor and target.suffix == ".md" and anchor not in {slug(h) for h in headings(target)}:
                problems.append(f"link {link}: no such heading in {target.relative_to(ROOT)}")
    return problems


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_section_and_link_the_docs_name_exists(path):
    assert dangling(path.read_text(encoding="utf-8"), path) == []


def test_every_file_and_section_the_help_names_exists(monkeypatch):
    from replemu.cli import build_parser

    monkeypatch.setenv("COLUMNS", "100000")  # no line breaks inside a name (argparse wraps at hyphens)
    parser = build_parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    texts = [parser.format_help()] + [p.format_help() for p in commands.choices.values()]
    for text in texts:
        assert dangling(text, ROOT / "README.md") == []


def test_a_dangling_reference_is_found():
    """The checker itself: the references issue 46 found, in the words they were written in."""
    where = ROOT / "docs" / "run.md"
    assert dangling("the verdict invariants of protocol.md §B.", where)
    assert dangling("the invariants (`docs/protocol.md` §C) in every state", where)
    assert dangling("knobs (`docs/protocol.md` §8); a bad file", where)
    assert dangling("see `../shared/protocol.md`", where)
    assert dangling('docs/explore.md "No such part"', where)
    assert dangling("[run](run.md#no-such-heading)", where)
    assert not dangling("the knobs (`docs/protocol.md` §4); allowed losses (`docs/protocol.md` §7.3)", where)
