"""Recall quality on Chinese, Japanese and Korean (bench/quality_cjk_data): dense alone, hybrid
with uncut terms (language english) and hybrid with the CJK terms (language auto) cut by each
asked segmenter (bench/cjk_segmenters: bigrams, jieba+sudachi+bigrams as shipped, or jieba,
SudachiPy, kiwipiepy, with or without bigrams), in the same run and with the default English
embedding model, on sets generated from each seed; then what each segmenter costs (load,
indexing, query).

Run: .venv/bin/python -m bench.quality_cjk [--segmenter jieba+sudachi+bigrams,words,words+bigrams]
     [--seeds 11,12,13] [--paraphrase] [--no-cost]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Literal

from api.recall.lexical import LexicalCollections
from api.recall.query_cache import QueryCache
from api.recall.query_filter import RecallFilters
from api.recall.request import RecallRequest
from api.recall.service import recall
from bench import cjk_segmenters
from bench.quality import AGENT, load
from bench.quality_cjk_data import LANGUAGES, build
from bench.quality_data import ConversationSet
from bench.stats import table
from shared.agents import AgentConfig
from shared.embedding.bm25 import documents_terms, query_terms
from shared.format.chunking import cut
from shared.format.payload import chunk_text, message_ids_of
from shared.store.interface import Store

KINDS = ("all", *LANGUAGES)
Mode = Literal["dense", "hybrid"]


@dataclass
class Ranks:
    """The rank (1-5) of each question's first evidence hit, 0 when not in the top 5, per
    language and seed, in question order."""

    by: dict[tuple[str, int], list[int]] = field(default_factory=dict)

    def add(self, kind: str, seed: int, rank: int) -> None:
        self.by.setdefault((kind, seed), []).append(rank)
        self.by.setdefault(("all", seed), []).append(rank)

    def of(self, kind: str) -> list[list[int]]:
        return [ranks for (k, _), ranks in sorted(self.by.items()) if k == kind]


def ranks(
    data: ConversationSet, store: Store, cache: QueryCache, agent: AgentConfig, mode: Mode
) -> list[tuple[str, int]]:
    """Each question's (language, rank of its evidence in the top 5 or 0)."""
    lexical = LexicalCollections(store)
    base = RecallRequest("", frozenset(data.recent_ids), 5, 0.3, RecallFilters(), mode=mode)
    out = []
    for q in data.questions:
        found = recall(agent, replace(base, query_text=q.text), store=store, cache=cache,
                       lexical=lexical)  # fmt: skip
        rank = next(
            (i for i, h in enumerate(found.hits, 1) if q.evidence & message_ids_of(h.payload)), 0
        )
        out.append((q.kind, rank))
    return out


def _row(label: str, kind: str, seeds: list[list[int]]) -> list[object]:
    hit = [sum(r > 0 for r in s) / len(s) for s in seeds]
    mrr = [sum(1 / r for r in s if r) / len(s) for s in seeds]
    spread = f"{min(hit):.2f}-{max(hit):.2f}" if len(seeds) > 1 else ""
    n = sum(len(s) for s in seeds)
    return [label, kind, n, f"{statistics.mean(hit):.3f}", spread, f"{statistics.mean(mrr):.3f}"]


def _versus(label: str, kind: str, mine: list[list[int]], base: list[list[int]]) -> list[object]:
    """Questions this one finds and bigrams miss, and the reverse, over all seeds; the hit@5
    difference per seed."""
    pairs = [
        (a > 0, b > 0) for s, t in zip(mine, base, strict=True) for a, b in zip(s, t, strict=True)
    ]
    wins, losses = sum(a and not b for a, b in pairs), sum(b and not a for a, b in pairs)
    diffs = [
        (sum(a > 0 for a in s) - sum(b > 0 for b in t)) / len(s)
        for s, t in zip(mine, base, strict=True)
    ]
    sd = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
    spread = f"{min(diffs):+.2f} to {max(diffs):+.2f}"
    return [label, kind, wins, losses, f"{statistics.mean(diffs):+.3f}", f"{sd:.3f}", spread]


def _label(name: str) -> str:
    return f"{name} (shipped)" if name == cjk_segmenters.SHIPPED else name


def measure(seeds: list[int], names: list[str], paraphrase: bool = False) -> dict[str, Ranks]:
    runs: list[tuple[str, str, str, Mode]] = [
        ("dense", "auto", "bigrams", "dense"),
        ("hybrid, uncut (english)", "english", "bigrams", "hybrid"),
    ]
    runs += [(f"hybrid, {_label(name)}", "auto", name, "hybrid") for name in names]
    out: dict[str, Ranks] = {label: Ranks() for label, *_ in runs}
    for seed in seeds:
        data = build(seed, paraphrase=paraphrase)
        vectors: dict[str, list[float]] = {}
        for label, language, name, mode in runs:
            agent = AGENT.model_copy(update={"language": language})
            with cjk_segmenters.segmenter(name):
                store, cache, count = load(data, agent, vectors)
                for kind, rank in ranks(data, store, cache, agent, mode):
                    out[label].add(kind, seed, rank)
        print(f"seed {seed}: {sum(len(s) for s in data.sessions)} messages, {count} chunks, "
              f"{len(data.questions)} questions", flush=True)  # fmt: skip
    return out


def quality_tables(results: dict[str, Ranks]) -> str:
    rows = [_row(label, kind, r.of(kind)) for kind in KINDS for label, r in results.items()]
    text = table(["recall", "questions", "n", "hit@5", "per seed", "MRR@5"], rows)
    base = results.get("hybrid, bigrams")
    if base is None:
        return text
    versus = [
        _versus(label, kind, r.of(kind), base.of(kind))
        for kind in KINDS
        for label, r in results.items()
        if label.startswith("hybrid, ") and label != "hybrid, bigrams" and "uncut" not in label
    ]
    head = ["vs hybrid, bigrams", "questions", "found, bigrams missed", "missed, bigrams found",
            "hit@5 diff (mean of seeds)", "sd of seeds", "per seed"]  # fmt: skip
    return text + "\n" + table(head, versus) if versus else text


def _best(run: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def _queries(texts: list[str]) -> None:
    for text in texts:
        query_terms(text, "auto")


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        kb = next(line.split()[1] for line in status if line.startswith("VmRSS:"))
    return int(kb) / 1024


def load_table(names: list[str]) -> str:
    """Each asked word segmenter's import and dictionaries (once per process): time and the
    process's resident memory it adds. Run first, before anything else loads them."""
    rows = []
    for language in dict.fromkeys(lang for n in names for lang in cjk_segmenters.languages_of(n)):
        before, started = _rss_mb(), time.perf_counter()
        cjk_segmenters.LOADERS[language]()
        took = time.perf_counter() - started
        rows.append([language, f"{took:.2f}", f"{_rss_mb() - before:.0f}"])
    return table(["segmenter of", "load s", "RSS MB"], rows) if rows else ""


def cost_table(names: list[str], seed: int, copies: int = 10) -> str:
    """Per segmenter and language: terms of 1,000 chunks and of one query (best of five), on
    that language's chunks and questions (`copies` times over, for a steadier clock)."""
    data = build(seed)
    chunks = [
        c
        for s in data.sessions
        for c in (*cut(s, AGENT.rules).closed, cut(s, AGENT.rules).open)
        if c
    ]
    texts = [chunk_text(c) for c in chunks]
    rows = []
    for name in names:
        with cjk_segmenters.segmenter(name):
            for language in LANGUAGES:
                mine = [t for t in texts if cjk_segmenters.script_language(t) == language] * copies
                asks = [q.text for q in data.questions if q.kind == language] * copies
                documents_terms(mine[:1], "auto")
                docs = _best(partial(documents_terms, mine, "auto"), 5) / len(mine) * 1e6
                one = _best(partial(_queries, asks), 5) / len(asks) * 1e6
                rows.append([name, language, len(mine), f"{docs:.0f}", f"{one:.0f}"])
    head = ["segmenter", "language", "chunks", "ms / 1,000 chunks", "us / query"]
    return table(head, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--segmenter", default=cjk_segmenters.SHIPPED,
                        help="comma-separated (bigrams always runs): bigrams, trigrams (bigrams "
                             "and trigrams), jieba, sudachi, kiwi, words (the three), each also "
                             "+bigrams (words and bigrams); jieba+sudachi+bigrams is "
                             "shipped")  # fmt: skip
    parser.add_argument("--seeds", default="11", help="sets generated from each, e.g. 11,12,13")
    parser.add_argument("--paraphrase", action="store_true",
                        help="ask each fact in other words than its own (the name or place "
                             "still in it)")  # fmt: skip
    parser.add_argument("--no-cost", action="store_true", help="skip the cost table")
    args = parser.parse_args(argv)
    names = cjk_segmenters.parse(args.segmenter)
    if "bigrams" not in names:
        names.insert(0, "bigrams")
    seeds = [int(seed) for seed in args.seeds.split(",")]
    if loads := load_table(names):
        print(loads)
    print(quality_tables(measure(seeds, names, args.paraphrase)))
    if not args.no_cost:
        print(cost_table(names, seeds[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
