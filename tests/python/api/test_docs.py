"""Docs that run: every ```python example block in README.md and docs/*.md runs here, from
the repository root with python/ on the path (the C++ example blocks are compiled and
run by ctest: tests/docs/CMakeLists.txt)."""
import sys
from pathlib import Path

import pytest

from conftest import run_python

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "docs"))
from extract_examples import examples  # noqa: E402

PYTHON_EXAMPLES = [(doc, i, code) for doc, i, language, code in examples(REPO) if language == "python"]


def test_the_readme_has_examples_in_both_languages():
    languages = {language for doc, _, language, _ in examples(REPO) if doc.name == "README.md"}
    assert languages == {"cpp", "python"}


@pytest.mark.parametrize("doc,index,code", PYTHON_EXAMPLES,
                         ids=[f"{d.relative_to(REPO)}#{i}" for d, i, _ in PYTHON_EXAMPLES])
def test_python_example_runs(doc, index, code):
    r = run_python(code, cwd=REPO)
    assert r.returncode == 0, f"{doc.relative_to(REPO)}, example {index}:\n{r.stderr[-3000:]}"
