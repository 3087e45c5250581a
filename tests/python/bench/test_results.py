"""bench/results/: each current table is what `backplane bench --side-by-side` makes of the
JSON it names (scripts/update_bench_results.py), so no table is edited by hand; and the links
between the results pages lead somewhere."""
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from backplane import bench

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "bench" / "results"


def _update():
    spec = importlib.util.spec_from_file_location("bench_results_update", ROOT / "scripts" / "update_bench_results.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


UPDATE = _update()


def _is_bench_run(path) -> bool:
    """A `backplane bench` run (Google Benchmark's JSON), not another tool's figures."""
    try:
        bench.load(path)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(UPDATE.TABLES))
def test_current_table_is_generated_from_its_json(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # the commands in a table name their JSON from the repository root
    committed = (RESULTS / name).read_text()
    assert committed == UPDATE.render(name), (
        f"bench/results/{name} differs from what scripts/update_bench_results.py writes from its JSON; "
        "run the script instead of editing the table")


def test_every_table_page_is_listed_and_every_current_run_is_used():
    pages = {p.name for p in RESULTS.glob("*.md")} - {"README.md", "method.md"}
    assert set(UPDATE.TABLES) <= pages, "a table page scripts/update_bench_results.py writes is missing"
    # Any other page holds figures of another tool (backplane.bench.compile_device, test times), written
    # by hand: it must say the command that made them, and be listed in the index.
    index = (RESULTS / "README.md").read_text()
    for name in sorted(pages - set(UPDATE.TABLES)):
        assert "Command" in (RESULTS / name).read_text(), f"bench/results/{name} does not say the command behind its figures"
        assert f"({name})" in index, f"bench/results/{name} is not listed in bench/results/README.md"
    used = {run for page in UPDATE.TABLES.values() for section in page.sections for run in section.runs}
    bench_runs = {p.name for p in RESULTS.glob("*.json") if _is_bench_run(p)}
    assert bench_runs == used, f"bench runs in bench/results/ that no table shows: {sorted(bench_runs - used)}"


def test_relative_links_of_the_results_pages_resolve():
    for page in [*RESULTS.glob("*.md"), *(RESULTS / "history").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to {target}, not found"
