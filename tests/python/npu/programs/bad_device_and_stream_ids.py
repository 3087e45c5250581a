"""Bad device and stream ids, each a RuntimeError naming the id and the range (c10 calls the
plugin through noexcept functions for these: a throwing check aborted). Prints `refused:
TEXT` for each, then the sum of a fresh tensor on npu:0 (test_npu_streams.py)."""
import torch, backplane; backplane.load('npu')
def expect(fn, text):
    try:
        fn()
    except RuntimeError as e:
        assert text in str(e), str(e)
        print("refused:", text)
    else:
        raise SystemExit(f"no error, expected {text!r}")
expect(lambda: torch.npu.current_stream(9), "backplane npu: device index 9 out of range; expected 0 <= index < 2")
expect(lambda: torch.npu.default_stream(9), "backplane npu: device index 9 out of range; expected 0 <= index < 2")
bad = torch.Stream(stream_id=99, device_index=0, device_type=torch.npu.default_stream(0).device_type)
expect(lambda: torch.npu.stream(bad).__enter__(), "backplane npu: unknown stream id 99; expected 0 to 4")
expect(lambda: torch.accelerator.current_stream(9).synchronize(), "device index 9 out of range")
torch.accelerator.set_stream(bad)  # c10 cannot refuse it here: the first use does
expect(lambda: torch.ones(2, device="npu:0"), "backplane npu: unknown stream id 99; expected 0 to 4")
torch.accelerator.set_stream(torch.npu.default_stream(0))
expect(lambda: torch.npu._queue_failure("x", device=9), "backplane npu: device index 9 out of range")
expect(lambda: torch.npu._hold_stream(300), "backplane npu: device index 300 out of range")
print(torch.ones(2, device="npu:0").sum().item())
