"""Text embeddings from a sentence-embedding model folder (BERT, RoBERTa, BGE, E5, GTE, Nomic, ...),
run with ``transformers`` on torch, on the CPU or a GPU (``embeddings.embeddings_device``).

A vector is the model's last hidden state pooled over the input's tokens, the way the folder's
sentence-transformers settings (``1_Pooling/config.json``) say (CLS token, last token, or the mean,
which is also the default), then scaled to unit length as OpenAI's are, so a dot product is the
cosine similarity. Inputs go through the model in batches; padding is masked out, so a text's
vector does not depend on what it was batched with. An input longer than the model's context is
refused rather than cut short.

``transformers`` is an optional extra (``pip install tabby-fixed[embeddings]``); without it a
load fails with a message that says so.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

logger = logging.getLogger(__name__)

#: Inputs per forward pass: large enough to keep a GPU busy, small enough for a CPU's memory.
BATCH_SIZE = 32

Pooling = Literal["mean", "cls", "lasttoken"]


class EmbeddingError(ValueError):
    """Input the model cannot embed (too long, empty), or a folder it cannot load."""


@dataclass(frozen=True)
class Embedded:
    vectors: list[list[float]]  # one unit-length vector per input, in input order
    tokens: int  # tokens read, over every input


def pooling_of(folder: Path) -> Pooling:
    """The folder's sentence-transformers pooling; mean when it names none."""
    settings = folder / "1_Pooling" / "config.json"
    if settings.is_file():
        modes = json.loads(settings.read_text(encoding="utf-8"))
        if modes.get("pooling_mode_cls_token"):
            return "cls"
        if modes.get("pooling_mode_lasttoken"):
            return "lasttoken"
    return "mean"


class EmbeddingModel:
    """One loaded embedding model; ``embed`` is blocking (callers run it in a thread) and serialised."""

    def __init__(self, folder: Path, device: str = "cpu") -> None:
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
            from transformers.utils.logging import disable_progress_bar
        except ImportError as error:
            raise EmbeddingError(f"Embeddings need transformers and torch: pip install 'tabby-fixed[embeddings]' "
                                 f"({error}).") from error
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            raise EmbeddingError("embeddings_device is cuda, but torch sees no CUDA device here.")
        disable_progress_bar()  # a server's log is not a terminal
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(folder)
            self.model = AutoModel.from_pretrained(folder).to(device).eval()
        except (OSError, ValueError, KeyError) as error:
            raise EmbeddingError(f"{folder.name} is not an embedding model transformers can load: {error}") from error
        self.name = folder.name
        self.device = device
        self.pooling = pooling_of(folder)
        config = self.model.config
        self.max_tokens = min(getattr(config, "max_position_embeddings", None) or 512,
                              self.tokenizer.model_max_length or 512)
        self.dimensions = config.hidden_size
        self._torch = torch
        self._lock = threading.Lock()
        logger.info("embedding model %s on %s: %d dimensions, %s pooling, %d tokens at most", self.name, device,
                    self.dimensions, self.pooling, self.max_tokens)

    def embed(self, texts: list[str]) -> Embedded:
        lengths = [len(ids) for ids in self.tokenizer(texts)["input_ids"]]
        for index, length in enumerate(lengths):
            if length > self.max_tokens:
                raise EmbeddingError(f"input[{index}] is {length} tokens; {self.name} reads at most "
                                     f"{self.max_tokens}.")
        vectors: list[list[float]] = []
        with self._lock, self._torch.inference_mode():
            for start in range(0, len(texts), BATCH_SIZE):
                vectors += self._batch(texts[start:start + BATCH_SIZE]).tolist()
        return Embedded(vectors, sum(lengths))

    def _batch(self, texts: list[str]) -> Any:
        torch = self._torch
        inputs = self.tokenizer(texts, padding=True, return_tensors="pt").to(self.device)
        hidden = self.model(**inputs).last_hidden_state.float()
        mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        elif self.pooling == "lasttoken" and self.tokenizer.padding_side == "left":
            pooled = hidden[:, -1]
        elif self.pooling == "lasttoken":
            last = inputs["attention_mask"].sum(dim=1) - 1  # right padding: the last real token
            pooled = hidden[torch.arange(hidden.shape[0]), last]
        else:
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        return torch.nn.functional.normalize(pooled, dim=-1).cpu()

    def unload(self) -> None:
        del self.model
        if self.device == "cuda":
            self._torch.cuda.empty_cache()
