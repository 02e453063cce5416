"""Files of a run directory written so that nothing recorded is lost: ``atomic_write`` (a reader, or a resume after a
kill -9, sees the old file or the new one, never half of one) and a full disk said in one line (``DiskFull``: where,
and what to do; what was recorded stays). The record (``search/store.py``), the result cache, the campaign's state
and its seeds write through here."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from evoforge.core import UsageError


class DiskFull(UsageError):
    """The disk under the record filled up. One line naming where and what to do; what was recorded stays."""


_SQLITE_FULL = 13  # sqlite3 error code: "database or disk is full"
_PG_DISK_FULL = "53100"


def no_space_left(exc: BaseException) -> bool:
    """Whether an error (or one it wraps: SQLAlchemy, Optuna) is a full disk or quota, by error code."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(e, "sqlite_errorcode", None) == _SQLITE_FULL or getattr(e, "pgcode", None) == _PG_DISK_FULL:
            return True
        stack += [e.__cause__, e.__context__, getattr(e, "orig", None)]
    return False


def disk_full_error(where: Path, run_dir: Path | None = None) -> DiskFull:
    run = run_dir or where
    return DiskFull(f"no space left on the disk of {where}: free space there (or copy the run directory to a disk "
                    f"with room), then continue with `evoforge run --resume {run}`; what was recorded is kept")


def atomic_write(path: Path, text: str, *, durable: bool = True) -> None:
    """Write then rename: a reader (or a resume after kill -9) sees the old file or the new one, never half.
    ``durable``: the bytes reach the disk before the rename (fsync), so a power cut or an OS crash keeps them too;
    a file that can be made again (a result cache's entry) skips it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as e:
        if no_space_left(e):
            raise disk_full_error(path.parent) from None
        raise
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if no_space_left(e):
            raise disk_full_error(path.parent) from None
        raise
