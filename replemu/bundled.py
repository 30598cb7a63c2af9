"""The bundled scenarios (``replemu/scenarios``, shipped as package data) by name, and the one
resolver of a scenario argument, which the API and every command taking scenario files share.

An argument (``replemu run ARG``, ``replemu compile ARG``, ``replemu shrink ARG``,
``replemu.run(ARG)``, ``replemu.load_scenario(ARG)``, ``replemu.events_frame(spark, [ARG])``)
is, in this order:

* an existing path: that file (so a file ``s1-kip101-scenario-1`` in the current directory wins
  over the bundled scenario of that name);
* a bare name (no ``/``; ``.yaml`` optional) of a bundled scenario: that scenario's file, found
  with ``importlib.resources``, so names work from an installed wheel in any directory;
* anything else: ``UnknownScenario`` (a ``ScenarioError``) naming the argument, the closest
  names and how to list them.

A bundled scenario's name is its file's name without ``.yaml`` (the ``name`` its YAML gives too);
its family is the directory it lies in: ``scenarios/`` holds the partition scenarios,
``scenarios/quorum/`` the metadata-quorum ones (docs/quorum.md).  ``replemu scenarios`` (and
``replemu.bundled_scenarios()``) lists them.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import re
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path

from emulator.scenario import ScenarioError

from .cli_common import EXIT_OK

# family -> its directory under replemu/scenarios (pyproject.toml's package-data ships each)
FAMILIES: dict[str, tuple[str, ...]] = {"partition": (), "quorum": ("quorum",)}
SUFFIXES = (".yaml", ".yml")

CLI_LISTING = "`replemu scenarios` lists them"
API_LISTING = "replemu.bundled_scenarios() lists them"


class UnknownScenario(ScenarioError):
    """A scenario argument that is neither an existing file nor a bundled scenario's name."""


@lru_cache(maxsize=1)
def _root() -> Path:
    """``replemu/scenarios`` as a directory on disk (extracted once when the package is zipped)."""
    root = resources.files("replemu").joinpath("scenarios")
    if isinstance(root, Path):
        return root
    stack = contextlib.ExitStack()  # a zip import: a temporary copy for this process
    atexit.register(stack.close)
    return Path(stack.enter_context(resources.as_file(root)))


@lru_cache(maxsize=1)
def _index() -> dict[str, tuple[str, Path]]:
    """name -> (family, file), in family then name order."""
    found: dict[str, tuple[str, Path]] = {}
    for family, parts in FAMILIES.items():
        folder = _root().joinpath(*parts)
        for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else ():
            found.setdefault(path.stem, (family, path))
    return found


def bundled_names() -> list[str]:
    """The bundled scenarios' names, partition family first."""
    return list(_index())


def bundled_path(name: str) -> Path | None:
    """The file of the bundled scenario ``name`` (``.yaml`` optional); None when there is none."""
    entry = _index().get(_strip_suffix(name))
    return entry[1] if entry else None


def bundled_scenarios() -> list[dict[str, str]]:
    """Every bundled scenario: ``name``, ``family`` (partition or quorum), ``description`` (the
    YAML's, whitespace folded) and ``path`` (its file, to copy and edit): what ``replemu
    scenarios --json`` prints."""
    from scenario_io.yaml_files import read_yaml

    listed = []
    for name, (family, path) in _index().items():
        document = read_yaml(path)
        description = document.get("description", "") if isinstance(document, dict) else ""
        listed.append({"name": name, "family": family, "description": " ".join(str(description).split()),
                       "path": str(path)})
    return listed


def summary(description: str) -> str:
    """A description's first sentence (the listing's one line)."""
    return re.split(r"(?<=[.!?])\s+", description.strip(), maxsplit=1)[0]


def _strip_suffix(text: str) -> str:
    for suffix in SUFFIXES:
        if text.endswith(suffix):
            return text[: -len(suffix)]
    return text


def closest_names(text: str, limit: int = 3) -> list[str]:
    """The bundled names nearest ``text``: those containing it first, then difflib's closest."""
    import difflib

    names = bundled_names()
    key = _strip_suffix(text).lower()
    if key in names:
        return [key]
    containing = [n for n in names if key and key in n] if len(key) >= 2 else []
    similar = difflib.get_close_matches(key, names, n=limit, cutoff=0.5)
    return list(dict.fromkeys(containing + similar))[:limit]


def resolve_scenario(argument: str | Path, listing: str = CLI_LISTING) -> Path:
    """The file a scenario argument stands for (the module's docstring has the rules);
    ``UnknownScenario`` names the argument and the closest bundled names, ``listing`` says how to
    list them all (the CLI's command or the API's function)."""
    text = os.fspath(argument)
    path = Path(text)
    if text and path.exists():
        return path
    separators = {os.sep, os.altsep or os.sep, "/"}
    if text and not any(s in text for s in separators):
        found = bundled_path(text)
        if found is not None:
            return found
        close = closest_names(text)
        hint = (f"did you mean {' or '.join(close)}?" if close
                else f"the bundled scenarios are {', '.join(bundled_names())}")
        raise UnknownScenario(f"{text}: neither a scenario file nor a bundled scenario's name; {hint} ({listing})")
    close = closest_names(Path(text).name) if text else []
    if close == [_strip_suffix(Path(text).name)]:
        hint = f"; the bundled scenario of that name is given by its name alone: {close[0]} ({listing})"
    elif close:
        hint = f"; a bundled scenario is given by its name alone: did you mean {' or '.join(close)}? ({listing})"
    else:
        hint = ""
    raise UnknownScenario(f"{text or repr(text)}: cannot read: no such file or directory{hint}")


# -- ``replemu scenarios`` -------------------------------------------------------------------------

def cmd_scenarios(args: argparse.Namespace) -> int:
    """``replemu scenarios [--json]``: name, family and one-line description of each bundled scenario."""
    listed = bundled_scenarios()
    if args.json:
        import json

        print(json.dumps(listed, indent=2))
        return EXIT_OK
    rows = [(s["name"], s["family"], summary(s["description"])) for s in listed]
    widths = [max(len(r[i]) for r in rows + [("NAME", "FAMILY", "")]) for i in (0, 1)]
    out = sys.stdout
    print(f"{'NAME':{widths[0]}}  {'FAMILY':{widths[1]}}  DESCRIPTION", file=out)
    for name, family, line in rows:
        print(f"{name:{widths[0]}}  {family:{widths[1]}}  {line}", file=out)
    print(f"\nGive a name where a scenario file goes (replemu run NAME, compile, shrink; replemu.run(NAME)); "
          f"a file of that name in the current directory wins. The files: {_root()}", file=out)
    return EXIT_OK
