"""Where the model runs (the CPU, or one CUDA GPU) and what follows from it: the batch budget
``embed.batch_tokens: auto`` means, the shape of a batch, and the vector store a job writes to.

Reproducibility differs by provider, and the batches follow from it:

- **CPU**: onnxruntime's CPU kernels compute each row of a batch alike at any batch size, so a
  text's vector is bit for bit its vector alone whichever texts share its call
  (tests/unit/stages/embed/test_store.py). Batches hold texts of one token length up to the budget; the last
  one of a length is simply shorter.
- **CUDA**: cuBLAS picks its kernels by the shape of a product, and the same text gets other
  bits in a batch of another size (on an H200: budgets 512 and 65536 gave bit-equal vectors for
  115 of 200 texts). So every call for texts of length L has the same shape, ``batch_rows(L)``
  rows of L tokens, whatever texts a job happened to claim: a short last batch is filled up with
  copies of one of its texts (their vectors are dropped). With the shape fixed, a row's vector
  depends only on its own tokens if the kernels compute every row of a batch alike, which a
  probe in each CUDA job checks (``embed.rows_alike``) and the report states.

The store keeps the vectors of each provider apart (``store_key``): CPU vectors under the model's
key as before; CUDA vectors under the model's key, the GPU's name and the budget (the shape), so
a CPU-made and a GPU-made vector never meet in one store, nor two GPUs' or two budgets'.
"""

from __future__ import annotations

import ctypes
import platform
import re
from dataclasses import dataclass

from vipune_eval.errors import EvalError

AUTO = "auto"
# What `embed.batch_tokens: auto` means per provider: each one's measured best.
# CPU: 512 and 1024 tie at 2 threads and 512 is best at 1 (bench_embed_flops.py, 2026-12-04,
# docs/performance.md). CUDA: on an H200 (onnxruntime-gpu 1.31.1, ~500-token texts, issue 33)
# 211 texts/s at 512, 641 at 4096, 757 at 16384 (the best), 711 at 65536.
AUTO_BUDGET = {"cpu": 512, "cuda": 16384}
CUDA_FIX = (
    "install the GPU build (`pip install -e '.[gpu]'`: onnxruntime-gpu, matching your CUDA) on a "
    "machine with an NVIDIA GPU and its driver, or set embed.cuda: false to embed on the CPU"
)


def no_cuda(what: str) -> EvalError:
    """embed.cuda asked for a GPU that is not there: stop, never embed on the CPU instead."""
    return EvalError(f"embed.cuda is set but {what}", fix=CUDA_FIX)


@dataclass(frozen=True)
class Provider:
    """The execution provider an embed job runs the model on, and the device's name."""

    name: str  # "cpu" or "cuda"
    device: str

    @property
    def fixed_shapes(self) -> bool:
        """Whether a text's vector depends on the shape of its batch (so the shape is fixed)."""
        return self.name == "cuda"

    def budget(self, batch_tokens: int | str) -> tuple[int, str]:
        """(tokens per model call, where that number comes from) for ``embed.batch_tokens``."""
        if batch_tokens == AUTO:
            return AUTO_BUDGET[self.name], f"auto: the measured best on {self.name.upper()}"
        return int(batch_tokens), "set in the config"

    def store_key(self, model_key: str, budget: int) -> str:
        """The vector store folder of this provider's vectors of the model ``model_key``."""
        if self.name == "cpu":
            return model_key
        device = re.sub(r"[^a-z0-9]+", "-", self.device.lower()).strip("-") or "gpu"
        return f"{model_key}-cuda-{device}-b{budget}"


def batch_rows(length: int, budget: int) -> int:
    """Texts of ``length`` tokens per model call at a budget of ``budget`` tokens (at least one)."""
    return max(1, budget // max(int(length), 1))


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine() or "unknown CPU"


def cuda_device_name(device_id: int = 0) -> str:
    """The name of CUDA device ``device_id`` as the driver gives it (CUDA_VISIBLE_DEVICES applies);
    an EvalError when there is no driver or no such device."""
    for library in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            cuda = ctypes.CDLL(library)
            break
        except OSError:
            continue
    else:
        raise no_cuda("there is no NVIDIA driver here (libcuda not found)")
    device, name = ctypes.c_int(), ctypes.create_string_buffer(256)
    for step, status in (
        ("cuInit", lambda: cuda.cuInit(0)),
        ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(device), device_id)),
        ("cuDeviceGetName", lambda: cuda.cuDeviceGetName(name, 256, device)),
    ):
        code = status()
        if code != 0:
            raise no_cuda(f"the NVIDIA driver finds no CUDA device {device_id} ({step} returned CUDA error {code})")
    return name.value.decode(errors="replace")


def resolve(cuda: bool) -> Provider:
    """The provider an embed job will run on; with ``cuda``, a named error unless onnxruntime has
    its CUDA provider and the driver shows a GPU (never a silent run on the CPU)."""
    if not cuda:
        return Provider("cpu", cpu_name())
    import onnxruntime

    available = onnxruntime.get_available_providers()
    if "CUDAExecutionProvider" not in available:
        raise no_cuda(f"onnxruntime has no CUDA provider here ({', '.join(available)})")
    return Provider("cuda", cuda_device_name())
