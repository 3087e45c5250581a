"""The docs name real files: the README's layout table matches the tree, and every
repository path the README and docs/ mention in `code` or as a relative link exists
(a moved file leaves no stale pointer behind)."""
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def tracked_top_level() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout: {out.stderr.strip()}")
    return {line.split("/", 1)[0] for line in out.stdout.splitlines() if "/" in line}


def layout_rows() -> list[str]:
    text = (REPO / "README.md").read_text()
    table = text[text.index("## Layout"):].split("\n## ", 1)[0]
    return [cell for line in table.splitlines() if line.startswith("| `")
            for cell in re.findall(r"`([^`]+)`", line.split("|")[1])]


def test_the_layout_table_names_existing_folders_and_every_top_level_one():
    rows = layout_rows()
    for path in rows:
        assert (REPO / path).exists(), f"README's layout table names {path}, which is not in the tree"
    named = {path.strip("/").split("/")[0] for path in rows}
    missing = {d for d in tracked_top_level() if (REPO / d).is_dir()} - named
    assert not missing, f"top-level folders the README's layout table does not name: {sorted(missing)}"


# A path in backticks that starts with a top-level folder of the tree; placeholders
# (<op>, NAME, *) and generated build outputs are not checked.
def mentioned_paths(doc: Path, roots: set[str]):
    text = doc.read_text()
    for token in re.findall(r"`([^`\s]+)`", text):
        token = token.split("::", 1)[0].rstrip(".,:;")  # a pytest id names its file
        if token.split("/", 1)[0] in roots and "/" in token and not re.search(r"[<>*{}$]|NAME|\.\.\.", token):
            yield token, REPO / token
    for target in re.findall(r"\]\(([^)#\s]+)\)", text):
        if "://" not in target:
            yield target, (doc.parent / target)


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(REPO).as_posix() for d in DOCS])
def test_every_path_a_document_names_exists(doc):
    roots = tracked_top_level() - {"build"}
    stale = sorted({name for name, path in mentioned_paths(doc, roots) if not path.exists()})
    assert not stale, f"{doc.relative_to(REPO)} names paths that do not exist: {stale}"
