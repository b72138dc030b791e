"""Peak memory of `memory-pool export` at 10k and 100k points: flat means it streams.

    .venv/bin/python -m bench.export_memory [--small 10000] [--large 100000] [--dims 384]

Fills two collections of the Qdrant REST test server (in-memory, this process) and a test
Redis with a dedupe mark per point, then runs the real command, `memory-pool export --agent
... --out FILE`, as a child process against them and reads its peak RSS (`wait4`'s
ru_maxrss). Baseline in the same run: the same command's peak RSS when the agent has no
collection yet (the interpreter and imports, no points).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import redis
from qdrant_client import QdrantClient

from shared.state import keys
from shared.state.upgrade import LAYOUT
from shared.store.interface import Store, StoredPoint
from shared.store.qdrant.engine import QdrantStore
from tests.support.qdrant_server import QdrantTestServer
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[1]
MODEL = "bench-model"
BATCH = 1000


def fill(store: Store, client: redis.Redis, collection: str, n: int, dims: int) -> None:
    client.set(keys.SCHEMA, LAYOUT)  # as memory-pool leaves it: nothing to upgrade
    store.ensure_collection(collection, size=dims, model=MODEL)
    rng = random.Random(n)
    for start in range(0, n, BATCH):
        points = [
            StoredPoint(
                id=str(uuid.UUID(int=rng.getrandbits(128))),
                payload={
                    "text": f"[2024-06-10]\nAlex: chunk {i} " + "words of a chat " * 30,
                    "messageIdList": [f"{i}-{k}" for k in range(8)],
                    "source": "discord",
                    "timestamp": 1718000000000 + i,
                },
                vector=[rng.uniform(-1, 1) for _ in range(dims)],
                sparse=None,
            )
            for i in range(start, min(n, start + BATCH))
        ]
        store.write_points(collection, points)
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(n, start + BATCH)):
            pipe.set(keys.seen(collection, "discord", f"{i}-0"), "conv", ex=86400)
        pipe.execute()


# The command, run so that it writes its own peak RSS at exit: VmHWM of /proc/self/status
# belongs to the process image after exec. (wait4's ru_maxrss would not do: Linux carries the
# forking parent's RSS over exec into it, and this parent holds the test servers' points.)
LAUNCHER = """
import sys
from memory_pool.main import app
try:
    app(sys.argv[2:], prog_name="memory-pool")
finally:
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
    open(sys.argv[1], "w").write(hwm.split()[1])
"""


def run_export(agent: str, out: Path, env: dict[str, str]) -> tuple[int, float, int]:
    """(peak RSS in KiB, seconds, exit code) of one export."""
    peak_file = out.with_suffix(".peak")
    command = [sys.executable, "-c", LAUNCHER, str(peak_file), "export", "--agent", agent,
               "--out", str(out)]  # fmt: skip
    started = time.perf_counter()
    with out.with_suffix(".log").open("w") as log:
        code = subprocess.run(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log
        ).returncode
    if code != 0 and out.stem != "none":
        sys.stderr.write(out.with_suffix(".log").read_text()[-2000:])
    return int(peak_file.read_text()), time.perf_counter() - started, code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=384)
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory() as folder,
        RedisServer() as redis_server,
        QdrantTestServer() as qdrant,
    ):
        client = redis.Redis.from_url(redis_server.url)
        store = QdrantStore(
            QdrantClient(url=qdrant.url, prefer_grpc=False, timeout=60, check_compatibility=False),
            local=False,
        )
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MEMORY_POOL_")},
            "QDRANT_URL": qdrant.url,
            "REDIS_URL": redis_server.url,
            # local mode behind the test server scrolls a 100k collection slowly (it sorts
            # every id per page); a real Qdrant answers a page in milliseconds
            "MEMORY_POOL_QDRANT_TIMEOUT": "300",
            "MEMORY_POOL_LEASE_SECONDS": "700",  # must stay above twice that timeout
        }
        rows = []
        none_rss, none_s, code = run_export("nobody", Path(folder) / "none.jsonl", env)
        rows.append(("no collection (baseline)", 0, none_rss, none_s, 0))
        for n in (args.small, args.large):
            started = time.perf_counter()
            fill(store, client, f"mem_p{n}", n, args.dims)
            print(f"filled {n} points in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            out = Path(folder) / f"p{n}.jsonl"
            rss, seconds, code = run_export(f"p{n}", out, env)
            if code != 0:
                raise SystemExit(f"export of {n} points failed with exit code {code}")
            lines = sum(1 for _ in out.open())
            rows.append((f"{n:,} points + {n:,} marks", lines, rss, seconds, out.stat().st_size))
            out.unlink()
        store.close()
        client.close()
    print(f"\n{args.dims} dims, `memory-pool export --out FILE` against the REST test server\n")
    print("| export | lines | peak RSS | took | file |")
    print("|---|---|---|---|---|")
    for name, lines, rss, seconds, size in rows:
        print(f"| {name} | {lines:,} | {rss / 1024:.0f} MiB | {seconds:.1f} s | "
              f"{size / 2**20:.0f} MiB |")  # fmt: skip
    small, large = rows[1][2], rows[2][2]
    print(f"\npeak RSS {args.large:,} / {args.small:,} points: {large / small:.2f}x; "
          f"above the baseline: {(small - rows[0][2]) / 1024:.0f} MiB vs "
          f"{(large - rows[0][2]) / 1024:.0f} MiB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
