"""A stand-in for onnxruntime's CUDA provider where no GPU is: the real tiny model on the CPU, with
the one property of a GPU that the embed stage must cope with — a text's bits depend on the shape
of the model call it is in.

Measured on an H200 (onnxruntime-gpu 1.31.1, issue 33): the same texts at budgets 512 and 65536
were bit-equal for 115 of 200 texts (max difference 4.7e-6), and one text alone against in a batch
for 48 of 50: cuBLAS picks its kernels by the shape of each product. So the double adds to each
vector a last-bits offset that is a function of the call's number of rows (the texts of a call
share one token length, so rows fix the shape). ``by_position`` also makes it depend on the
row's place in the batch: a GPU whose kernels compute rows of one batch differently, which the
embed job's probe (``embed.rows_alike``) must notice.
"""

from __future__ import annotations

import numpy as np


class ShapeSensitiveGPU:
    """Wraps a fastembed model loaded on the CPU; records every call's texts."""

    ULP = np.float32(2.0**-23)

    def __init__(self, cpu_model, by_position: bool = False) -> None:
        self.cpu = cpu_model
        self.by_position = by_position
        self.calls: list[list[str]] = []

    def embed(self, texts, batch_size: int = 256):
        texts = list(texts)
        assert batch_size >= len(texts), "one call per batch: embed_batched passes the batch's size"
        self.calls.append(texts)
        alone = np.stack([next(iter(self.cpu.embed([t], batch_size=1))) for t in texts])
        offset = np.arange(len(texts)) if self.by_position else np.zeros(len(texts))
        return list(alone + self.ULP * (len(texts) + offset)[:, None].astype(np.float32))
