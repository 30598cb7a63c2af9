#!/usr/bin/env python3
"""Write README.md's variant table from the variant table (``emulator.variants.VARIANT_DOCS``).

The rows between ``<!-- variants: ... -->`` and ``<!-- /variants -->`` are replaced; ``--check``
changes nothing and exits 1 when the README is not what this would write (tests/test_variant_text.py
runs the same comparison)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from emulator.variants import VARIANT_DOCS  # noqa: E402

BLOCK = re.compile(r"(<!-- variants: [^\n]*-->\n)(.*?)(<!-- /variants -->)", re.S)


def table() -> str:
    lines = ["| variant | Kafka | what it adds |", "|---|---|---|"]
    lines += [f"| `{name}` | {doc.kafka} | {doc.adds} |" for name, doc in VARIANT_DOCS.items()]
    return "\n".join(lines) + "\n"


def rewritten(readme: str) -> str:
    if not BLOCK.search(readme):
        raise SystemExit("README.md: no <!-- variants: ... --> ... <!-- /variants --> block")
    return BLOCK.sub(lambda m: m.group(1) + table() + m.group(3), readme, count=1)


def main(argv: list[str]) -> int:
    path = ROOT / "README.md"
    text = path.read_text(encoding="utf-8")
    new = rewritten(text)
    if "--check" in argv:
        if new != text:
            print("README.md: the variant table differs from emulator.variants.VARIANT_DOCS; "
                  "run python scripts/variant_table.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        path.write_text(new, encoding="utf-8")
        print("README.md: variant table written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
