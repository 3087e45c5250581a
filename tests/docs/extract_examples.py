#!/usr/bin/env python3
"""Writes the code blocks marked as examples in README.md and docs/*.md to files, so the
build compiles the C++ ones and the tests run the Python ones: docs that run.

A block is an example when its fence reads ```cpp example or ```python example. Each is
a whole program (C++: with main(), returning 0 on success; Python: run from the
repository root with python/ on the path, raising on failure).

    extract_examples.py SOURCE_DIR OUT_DIR    writes OUT_DIR/<doc>_<n>.cpp|.py, prints their paths
"""
import re
import sys
from pathlib import Path

FENCE = re.compile(r"^```(cpp|python) example[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
SUFFIX = {"cpp": ".cpp", "python": ".py"}


def documents(source: Path):
    yield source / "README.md"
    yield from sorted((source / "docs").glob("*.md"))


def examples(source: Path):
    """(document, index, language, code) for every example block."""
    for doc in documents(source):
        if doc.is_file():
            for index, match in enumerate(FENCE.finditer(doc.read_text()), start=1):
                yield doc, index, match.group(1), match.group(2)


def main() -> None:
    source, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*_example_*"):
        old.unlink()
    for doc, index, language, code in examples(source):
        stem = doc.relative_to(source).as_posix().replace("/", "_").replace(".md", "")
        path = out / f"{stem}_example_{index}{SUFFIX[language]}"
        header = "// " if language == "cpp" else "# "
        path.write_text(f"{header}from {doc.relative_to(source)}, example {index} (generated; edit the document)\n{code}")
        print(path)


if __name__ == "__main__":
    main()
