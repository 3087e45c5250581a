"""models.train: a small decoder LM trained through Backplane ops (rms_norm, add, mul
with their registry backward formulas) beside a pure-PyTorch twin. The loss must fall
and every parameter's gradient must match the twin's at every step (train() raises
otherwise)."""
import math

from models.train import VOCAB, train


def test_training_on_cpu_matches_the_pytorch_twin_and_the_loss_falls():
    losses, worst = train("cpu", steps=25, batch_size=16, log=None)
    assert losses[0] > 0.8 * math.log(VOCAB)  # starts near chance
    assert losses[-1] < 0.8 * losses[0]
    assert worst < 1e-4


def test_training_under_torch_compile_matches_too():
    losses, worst = train("cpu", steps=4, batch_size=8, log=None, compile=True, compile_backend="aot_eager")
    assert worst < 1e-4 and len(losses) == 4
