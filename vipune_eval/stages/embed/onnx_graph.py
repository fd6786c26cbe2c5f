"""The model's ONNX graph as onnxruntime runs it: the exported file less its softmax NaN guards.

torch's ONNX export of scaled-dot-product attention guards every softmax against a row whose
scores are all masked: ``Where(IsNaN(p), 0, p)`` over the whole [batch, heads, seq, seq]
probability tensor. A row is all masked only for a text with no unmasked token, and every
tokenized text has at least [CLS] and [SEP], so the guard returns ``p`` unchanged, bit for bit,
padded batches included. It is not free: two elementwise passes over the largest tensor of each
layer, 40 % of the all-MiniLM-L6 export's time at 512 tokens (onnxruntime's profile,
docs/performance.md). Dropping it changes no vector (tests/unit/stages/embed/test_onnx_graph.py); an export without
the pattern (such as an older one that adds ``(1 - mask) * min`` before the softmax) is run as it is.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from vipune_eval.core.io import log
from vipune_eval.errors import EvalError


def drop_nan_guards(model) -> int:
    """Rewire every ``Where(IsNaN(p), c, p)`` whose ``p`` is a Softmax output to ``p`` itself and
    delete the guard's nodes; returns how many guards were dropped. ``model``: an onnx ModelProto."""
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    outputs = {o.name for o in graph.output}
    replaced: dict[str, str] = {}
    orphans: set[str] = set()
    dead: set[int] = set()
    for node in graph.node:
        if node.op_type != "Where" or node.domain not in ("", "ai.onnx"):
            continue
        condition, _, probabilities = node.input
        isnan, softmax = producer.get(condition), producer.get(probabilities)
        if (
            isnan is not None
            and isnan.op_type == "IsNaN"
            and list(isnan.input) == [probabilities]
            and softmax is not None
            and softmax.op_type == "Softmax"
            and node.output[0] not in outputs
        ):
            replaced[node.output[0]] = probabilities
            orphans.update(node.input[:2])  # its IsNaN and its constant, unless read elsewhere
            dead.add(id(node))
    if not replaced:
        return 0
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in replaced:
                node.input[i] = replaced[name]
    still_read = {name for node in graph.node if id(node) not in dead for name in node.input} | outputs
    orphans -= still_read  # (onnxruntime would drop them too, with a warning each)
    dead.update(id(node) for node in graph.node if node.output and node.output[0] in orphans)
    kept = [node for node in graph.node if id(node) not in dead]
    del graph.node[:]
    graph.node.extend(kept)
    unread = [init for init in graph.initializer if init.name in orphans]
    for init in unread:
        graph.initializer.remove(init)
    return len(replaced)


@contextlib.contextmanager
def runnable_folder(model_dir: Path, file: str) -> Iterator[Path]:
    """A model folder to load ``file`` from: ``model_dir`` itself when the graph has no NaN guard,
    else a temporary folder holding the rewritten graph at the same relative path beside links to
    the model's other files (tokenizer, configs). The folder lives while the block runs: long
    enough for onnxruntime to read the graph into its session."""
    import onnx

    source = model_dir / file
    try:
        model = onnx.load(str(source))
    except Exception as exc:  # onnx raises DecodeError, ValidationError, OSError...
        raise EvalError(
            f"{source}: not a readable ONNX file ({str(exc)[:200]}); the model folder is "
            "damaged: copy or download it again"
        ) from exc
    dropped = drop_nan_guards(model)
    if not dropped:
        yield model_dir
        return
    log.info("model %s: %d softmax NaN guards dropped (exact: no text is all padding)", source, dropped)
    with tempfile.TemporaryDirectory(prefix="vipune-eval-model-") as tmp:
        folder = Path(tmp)
        for entry in model_dir.iterdir():
            if entry.name != Path(file).parts[0]:
                os.symlink(entry.resolve(), folder / entry.name)
        target = folder / file
        target.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(target))  # one file: external data, if any, was read in by onnx.load
        yield folder
