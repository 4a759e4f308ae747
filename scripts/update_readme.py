#!/usr/bin/env python3
"""Copy generated tables into README.md between their markers (run by `make`).

A block ``<!-- generated: PATH -->`` ... ``<!-- /generated -->`` in the README is replaced by the
contents of PATH (relative to the repository root), so the README's register tables are the ones
generated from the register-map description. ``--check`` exits 1 if the README is stale.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- generated: (?P<path>\S+) -->\n)(?P<body>.*?)(<!-- /generated -->)",
                   re.DOTALL)


def render(text: str) -> str:
    def repl(m):
        body = (ROOT / m.group("path")).read_text()
        return m.group(1) + body.rstrip("\n") + "\n" + m.group(4)
    return BLOCK.sub(repl, text)


def main(argv):
    readme = ROOT / "README.md"
    old = readme.read_text()
    new = render(old)
    if "--check" in argv:
        if new != old:
            print("README.md is stale: run `make`", file=sys.stderr)
            return 1
        return 0
    if new != old:
        readme.write_text(new)
        print("updated README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
