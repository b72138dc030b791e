"""How Qdrant Edge is tuned for serve: segment size, index and quantization, the optimizer's
cadence and the size of a bulk write's slices (measured: BENCHMARKS.md, the embedded engine)."""

from __future__ import annotations

import qdrant_edge as edge

from shared.store import interface as store

# Edge indexes only in optimize(), which holds the GIL for its whole run (qdrant-edge-py
# 0.9.0), so every other thread of serve (a /save, a /retrieve) waits meanwhile. Its cost is
# per point, mostly the payload indexes (BENCHMARKS.md §13: ~0.3 s for 650 points at 384 or
# 3,072 dimensions), so a segment holds SEGMENT_POINTS points whatever the vector size: each
# run indexes one such segment, well under half a second. Not fewer: every segment maps
# ~150 files and a process may map 65,530 (vm.max_map_count), i.e. ~400 segments for all of
# serve's collections (~250,000 chunks; more need a Qdrant server or a higher limit).
SEGMENT_POINTS = 650
# No HNSW graph: a segment this small is under Qdrant's full-scan threshold (10 MB of
# vectors), where the search is a plain scan whether a graph exists or not; building one cost
# a fifth of each optimize for nothing.
HNSW = edge.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000)
# The scan reads int8 copies of the vectors (a quarter of the memory traffic: 50k x 3,072
# recalled in 19 ms instead of 32), and the best candidates (twice the limit) are scored
# again on the original vectors, so the scores and the order are the exact cosines. Costs
# ~15% more per optimize (BENCHMARKS.md §13d).
QUANTIZED = edge.ScalarQuantizationConfig(type=edge.ScalarType.Int8, quantile=0.99, always_ram=True)
RESCORED = edge.SearchParams(
    quantization=edge.QuantizationSearchParams(rescore=True, oversampling=2.0)
)
# A cosine of given points is read exactly, never from the int8 copies.
EXACT = edge.SearchParams(exact=True)
# How often the background optimizer looks at shards written since its last run.
OPTIMIZE_EVERY_SECONDS = 2.0
# A bulk write (an import, a migration, the BM25 backfill) goes in slices of at most half a
# segment, and the writer itself optimizes as soon as a segment's worth is unindexed: one
# optimize then indexes one segment, never the many a background run would find after a fast
# import (a 10k import indexed in one run held the GIL for seconds; BENCHMARKS.md §13).
SLICE_POINTS = min(store.UPSERT_BATCH, SEGMENT_POINTS // 2)


def segment_kb(dims: int) -> int:
    """SEGMENT_POINTS of `dims`-dimensional vectors in KB, as Edge's thresholds count."""
    return max(1, SEGMENT_POINTS * 4 * dims // 1024)


def optimizers(dims: int) -> edge.EdgeOptimizersConfig:
    size = segment_kb(dims)
    return edge.EdgeOptimizersConfig(indexing_threshold=size, max_segment_size=size)
