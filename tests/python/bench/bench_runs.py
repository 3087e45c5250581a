"""Engine results made up for the bench tests (test_bench.py, test_compare.py): rows
as Google Benchmark writes them, with chosen timings."""


def fake_entries(name, times, bytes_per_second=1e9, error=None):
    """The engine's JSON entries of one row: one per timing, or the one a failed row gets."""
    if error:  # Google Benchmark writes one entry for a row that failed
        return [{"name": name, "run_name": name, "run_type": "iteration", "error_occurred": True,
                 "error_message": error, "real_time": 0, "time_unit": "us"}]
    rows = []
    for t in times:
        rows.append({"name": name, "run_name": name, "run_type": "iteration", "real_time": t, "time_unit": "us",
                     "bytes_per_second": bytes_per_second})
    return rows


def fake_run(times_backplane, times_reference=(10.0, 10.0, 10.0), backend="cpu", error=None):
    """A run of add on one backend: its backplane, reference and copy_ rows, as the engine writes them."""
    return {"context": {f"backend.{backend}": "/x/libbackplane_cpu.so (version 0.1.0, key CPU, device cpu)"},
            "benchmarks": fake_entries(f"add/{backend}/backplane/1M_elements_float32", times_backplane, 2e9, error)
            + fake_entries(f"add/{backend}/reference/1M_elements_float32", times_reference, 1e9)
            + fake_entries(f"add/{backend}/copy_/1M_elements_float32", (4.0, 4.0, 4.0), 4e9)}


def no_run(*args, **kwargs):
    """Stands in for bench.run where a refusal must come before any timing."""
    raise AssertionError("the engine ran although the flags were refused")
