"""`probes.on_another_device`, in process: code that keeps every tensor with its input passes, whichever way it
is written; a tensor made without the input's device fails, as it would on a GPU."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch

from grader.inside.shared.probes import on_another_device

REPO = Path(__file__).resolve().parents[2]
TOKENS = {"shape": [2, 6], "dtype": "int64"}


def load(path: Path, exercise: str, edits: tuple[tuple[str, str], ...] = ()) -> ModuleType:
    source = path.read_text(encoding="utf-8")
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    module = ModuleType(f"solutions.{exercise}")
    module.__package__ = "solutions"
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def masking_files() -> list[Path]:
    return [REPO / "solutions/masking.py", *sorted((REPO / "tests/kit/submissions/masking/correct").glob("*.py"))]


def transformer_files() -> list[Path]:
    return [REPO / "solutions/transformer.py",
            *sorted((REPO / "tests/kit/submissions/transformer/correct").glob("*.py"))]


@pytest.mark.parametrize("path", masking_files(), ids=lambda path: path.stem)
def test_correct_masking_keeps_to_the_input_device(path):
    masking = load(path, "masking")
    assert on_another_device(masking.causal_average, {"shape": [2, 5, 3], "dtype": "float32"}) == ""
    assert on_another_device(masking.weight_mask_and_normalization, {"shape": [2, 5, 5], "dtype": "float32"}) == ""


@pytest.mark.parametrize("path", transformer_files(), ids=lambda path: path.stem)
def test_correct_transformers_keep_to_the_input_device(path):
    transformer = load(path, "transformer")
    model = transformer.Transformer(11, 13, d_model=16, n_heads=2, d_ff=16, max_seq_len=16).eval()
    assert on_another_device(model, TOKENS, {"shape": [2, 5], "dtype": "int64"}) == ""
    assert on_another_device(transformer.greedy_decode, model, TOKENS, 5, 1) == ""


# Tensors made without the input's device, as students write them: (exercise, function, its input, the edit of the
# reference). Here a fake device shows them; on a GPU, test_gpu.py grades them with --device cuda.
MADE_ON_THE_CPU = (
    ("masking", "causal_average", [2, 5, 3], ("dtype=x.dtype, device=x.device)", "dtype=x.dtype)")),
    ("masking", "weight_mask_and_normalization", [2, 5, 5],
     ("dtype=torch.bool, device=weight.device)", "dtype=torch.bool)")),
    ("transformer", "greedy_decode", None, ("dtype=torch.long, device=src.device)", "dtype=torch.long)")),
)


@pytest.mark.parametrize(("function", "shape", "edit"), [made[1:] for made in MADE_ON_THE_CPU if made[0] == "masking"])
def test_a_tensor_made_on_the_cpu_mixes_devices(function, shape, edit):
    masking = load(REPO / "solutions/masking.py", "masking", (edit,))
    assert "two devices" in on_another_device(getattr(masking, function), {"shape": shape, "dtype": "float32"})


def test_greedy_decode_starting_on_the_cpu_mixes_devices():
    transformer = load(REPO / "solutions/transformer.py", "transformer", (MADE_ON_THE_CPU[2][3],))
    model = transformer.Transformer(11, 13, d_model=16, n_heads=2, d_ff=16, max_seq_len=16).eval()
    assert "two devices" in on_another_device(transformer.greedy_decode, model, TOKENS, 5, 1)


def test_a_stub_is_still_a_stub():
    def stub(x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("fill me in")

    with pytest.raises(NotImplementedError):
        on_another_device(stub, {"shape": [2], "dtype": "float32"})
