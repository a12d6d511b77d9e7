"""A numpy sampler with a known shape: cost per sample falls with batch size, then flattens.

Work is done in fixed chunks of ``CHUNK`` samples (a partial chunk is padded, as a
batched kernel would be), so a call costs ``ceil(batch_size / CHUNK)`` chunk
products: per-sample cost falls until ``batch_size == CHUNK`` and is flat after.
Every sample also keeps ``mib_per_sample`` MiB in a store, so peak memory grows
with the batch.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

CHUNK = 16
WIDTH = 1024  # elementwise work only: no BLAS thread pool to add noise


class ChunkedSampler:
    def __init__(
        self,
        batch_size: int,
        prof: Any = None,
        mib_per_sample: float = 1.0,
        chunk_wait_s: float = 0.0,
    ) -> None:
        rng = np.random.default_rng(0)
        self.chunk_wait_s = float(chunk_wait_s)
        self.batch_size = int(batch_size)
        self.x = rng.standard_normal((CHUNK, WIDTH))
        cols = max(WIDTH, int(mib_per_sample * 2**20 / 8))
        self.store = np.ones((self.batch_size, cols))  # written, so resident
        self.chunks = -(-self.batch_size // CHUNK)
        self.out = np.empty((self.chunks * CHUNK, WIDTH))
        self.prof = prof
        self.closed = False

    def _compute(self) -> np.ndarray:
        out = self.out
        for c in range(self.chunks):
            if self.chunk_wait_s > 0:  # a chunk handed to a device or a simulator, awaited
                time.sleep(self.chunk_wait_s)
            y = self.x
            for _ in range(3):
                y = np.tanh(y * 0.9 + 0.1)
            out[c * CHUNK : (c + 1) * CHUNK] = y
        return out[: self.batch_size]

    def sample(self) -> int:
        prof = self.prof
        if prof is None:
            out = self._compute()
            self.store[:, :WIDTH] = out
            return self.batch_size
        with prof.phase("compute"):
            out = self._compute()
        with prof.phase("store"):
            self.store[:, :WIDTH] = out
        return self.batch_size

    def close(self) -> None:
        self.closed = True


def make_sampler(batch_size: int, prof: Any = None, mib_per_sample: float = 1.0) -> ChunkedSampler:
    return ChunkedSampler(batch_size, prof=prof, mib_per_sample=mib_per_sample)


make_sampler.phases = ("compute", "store")  # type: ignore[attr-defined]


PACED_CHUNK_S = 0.004


def make_paced_sampler(batch_size: int, prof: Any = None) -> ChunkedSampler:
    """The same shape, each chunk also waiting ``PACED_CHUNK_S``: a call's time is then
    set by its chunks, not by the machine's other load (a wait is not stretched by a
    neighbour's CPU use the way computing is), so 2 -> 16 is 8x and 16 -> 32 flat even
    on a loaded machine."""
    return ChunkedSampler(batch_size, prof=prof, chunk_wait_s=PACED_CHUNK_S)


make_paced_sampler.phases = ("compute", "store")  # type: ignore[attr-defined]


def make_plain(batch_size: int) -> Any:
    """The same sampler as a bare callable, no phases, no store."""
    s = ChunkedSampler(batch_size, mib_per_sample=0)
    return s.sample


def make_shrinking(chunks: int, total_mib: int = 96) -> Any:
    """Build-time scratch of ``total_mib / chunks`` MiB, freed before sampling starts.

    Per-value peaks fall as ``chunks`` grows; a shared process's high-water mark
    hides that, because it never falls.
    """
    scratch = np.ones(int(total_mib / chunks * 2**20 / 8))
    checksum = float(scratch[::4096].sum())
    del scratch

    def sample() -> int:
        return 1 if checksum > 0 else 1

    return sample
