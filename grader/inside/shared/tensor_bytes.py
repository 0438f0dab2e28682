"""`tensor_bytes` turns named tensors into safetensors bytes and back, for `protocol`'s messages.

Copied into the sandbox with `protocol`: it imports only torch and safetensors (and numpy through it).
"""

from __future__ import annotations

import torch
from safetensors import serialize as _serialize
from safetensors.numpy import save as _save_arrays
from safetensors.torch import load as load_tensors
from safetensors.torch import save as _save_torch

try:
    from safetensors import TensorSpec as _TensorSpec  # safetensors 0.8 on
except ImportError:
    _TensorSpec = None

__all__ = ["dtype_name", "load_tensors", "preflight", "save_tensors"]

_DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in (
        "bool", "uint8", "int8", "int16", "int32", "int64",
        "float16", "bfloat16", "float32", "float64",
    )
}
_DTYPE_NAMES = {dtype: name for name, dtype in _DTYPES.items()}
_NUMPY_DTYPES = frozenset(_DTYPES.values()) - {torch.bfloat16}


def save_tensors(tensors: dict[str, torch.Tensor]) -> bytes:
    """The safetensors bytes of `tensors`, written by safetensors straight from each tensor's memory.

    A `TensorSpec` (safetensors 0.8 on) gives safetensors a tensor's address: for a model's small tensors,
    three to four times faster than its numpy writer, which makes an array of each and asks ctypes for its
    address, and no copy first (safetensors.torch refuses two views of one storage; here each is one more spec).
    """
    if _TensorSpec is None:
        return _save_before_0_8(tensors)
    # Held here until serialize returns: each spec is only an address into one of these.
    held = {name: tensor.detach().to("cpu").resolve_neg().contiguous() for name, tensor in tensors.items()}
    return _serialize({name: _TensorSpec(dtype=dtype_name(tensor.dtype), shape=tensor.shape,
                                         data_ptr=tensor.data_ptr(), data_len=tensor.nbytes)
                       for name, tensor in held.items()})


def _save_before_0_8(tensors: dict[str, torch.Tensor]) -> bytes:
    """Through numpy where every dtype has a numpy twin (bfloat16 has none): same bytes, four times faster
    than safetensors.torch, which refuses tensors that share storage and gets clones for that."""
    if all(tensor.dtype in _NUMPY_DTYPES and tensor.device.type == "cpu" for tensor in tensors.values()):
        return _save_arrays({name: tensor.detach().resolve_neg().contiguous().numpy()
                             for name, tensor in tensors.items()})
    return _save_torch({name: tensor.detach().to("cpu").resolve_neg().clone(memory_format=torch.contiguous_format)
                        for name, tensor in tensors.items()})


def preflight() -> None:
    """Fail early, and say why, where this environment cannot move tensors at all."""
    try:
        load_tensors(save_tensors({"probe": torch.zeros(1)}))
    except ImportError as error:
        raise RuntimeError(f"safetensors cannot serialise tensors here ({error}): pip install numpy") from None


def dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype))
