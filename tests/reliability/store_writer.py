"""A second writer of one study: ``python -m tests.reliability.store_writer RUN_DIR URL WRITER N START_AT``.

Records N finished trials through ``OptunaStore`` (candidate file, trial, artifact), starting at the wall-clock
time START_AT so that several writers overlap, and prints how many it recorded.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from evoforge.search.store import OptunaStore

from evoforge.core import Candidate, EvalResult, EvalStatus

CAMPAIGN = "locks"
TASK = "19_ReLU"
SOURCE = (Path(__file__).resolve().parent.parent / "fixtures" / "relu" / "correct.py").read_text()


def record_many(store: OptunaStore, writer: str, n: int) -> list[int]:
    numbers = []
    for i in range(n):
        candidate = Candidate.from_source(SOURCE + f"# writer {writer}, child {i}\n", task=TASK, operator="params",
                                          params={"BLOCK": [256, 512, 1024, 2048][i % 4]})
        if i % 3 == 2:
            result = EvalResult.failure(EvalStatus.INCORRECT, f"wrong output ({writer} {i})")
        else:
            result = EvalResult(status=EvalStatus.OK, speedup=1.0 + i / 100, runtime_ms=0.5, ref_ms=0.5 * (1 + i / 100))
        numbers.append(store.record(TASK, candidate, result, extra_attrs={"writer": writer, "i": i}))
    return numbers


def main(argv: list[str]) -> int:
    run_dir, url, writer, n, start_at = argv[0], argv[1], argv[2], int(argv[3]), float(argv[4])
    store = OptunaStore(run_dir=Path(run_dir), campaign=CAMPAIGN, storage_url=url)
    store.study(TASK)
    time.sleep(max(0.0, start_at - time.time()))
    numbers = record_many(store, writer, n)
    print(json.dumps({"writer": writer, "recorded": len(numbers)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
