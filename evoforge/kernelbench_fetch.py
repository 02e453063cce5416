"""``evoforge kernelbench fetch``: KernelBench's levels 1 and 2 from a pinned release archive into the cache.

The archive is downloaded to a temporary file beside the destination, and only the problem files of
``KernelBench/level1`` and ``KernelBench/level2`` (and the licence) are written, each by name, into a staging
folder that takes the destination's place in two renames. What is verified: an archive given with ``--sha256`` by
its bytes, before anything is unpacked; the pinned release by its content, the levels' problem files as unpacked
(``levels_sha256``: each file's name and SHA-256), since GitHub's archives of a commit are made on request and
their compressed bytes are not promised to stay the same while the files in them are. A failed download, a
mismatch of either kind or an archive without the levels leaves the destination as it was.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import IO, Any

from evoforge.core import UsageError
from evoforge.task import kernelbench_cache_dir, locate_kernelbench

# ScalingIntelligence/KernelBench at the commit whose level1/ and level2/ this project's tests and results use.
PINNED_COMMIT = "423217d9fda91e0c2d67e4a43bf62f96f6d104f1"
PINNED_URL = f"https://github.com/ScalingIntelligence/KernelBench/archive/{PINNED_COMMIT}.tar.gz"
# ``levels_sha256`` of the pinned commit's KernelBench/level1 and level2 (200 problem files; computed from the commit's
# tree, `git archive 423217d9 KernelBench/level1 KernelBench/level2`, which matches the copy this project's tests
# and results use byte for byte). Any other URL needs --sha256 (of its archive's bytes).
PINNED_LEVELS_SHA256 = "4144fa8463ddaebb264c23b0ba3f90aa6cd986e86c063b9ea4212d92fad13dde"
LEVELS = ("level1", "level2")
SOURCE_FILE = "SOURCE.json"  # written beside the levels: the URL, checksum and time of the fetch
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


@dataclass(frozen=True)
class Fetched:
    dest: Path
    problems: dict[str, int]  # level -> problem files
    sha256: str
    verified: bool


def levels_sha256(folder: Path) -> str:
    """The content checksum of unpacked levels: SHA-256 over each problem file's ``levelN/name`` and SHA-256, in
    name order (the archive's compression, timestamps and other files do not enter it)."""
    lines = sorted(f"{path.parent.name}/{path.name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n"
                   for level in LEVELS for path in (folder / level).glob("*.py"))
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def _checked_sha256(url: str, sha256: str | None) -> str:
    """The checksum the download's bytes must have ('' for the pinned URL: its levels are checked instead)."""
    if sha256 is not None:
        if not _HEX64.match(sha256):
            raise UsageError(f"--sha256 {sha256!r}: not a SHA-256 (64 hexadecimal digits)")
        return sha256.lower()
    if url == PINNED_URL:
        return ""
    raise UsageError(f"--url {url}: give --sha256 HEX too (only the pinned archive's checksum is known to evoforge; "
                     "`sha256sum` of a copy you trust gives it)")


def _download(url: str, into: IO[bytes], *, timeout_s: float, progress: bool) -> str:
    """Stream ``url`` into ``into``; the hex SHA-256 of what arrived."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    digest = hashlib.sha256()
    try:
        response = urllib.request.urlopen(url, timeout=timeout_s)  # noqa: S310 - the user's URL, http(s) or file
    except urllib.error.HTTPError as e:
        raise UsageError(f"kernelbench fetch: {url}: HTTP {e.code} {e.reason} (check --url)") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise UsageError(f"kernelbench fetch: cannot download {url} ({reason}); with no internet here, download "
                         "the archive elsewhere and give --url file:///path/to/it --sha256 HEX") from None
    with response:
        total = int(response.headers.get("Content-Length") or 0) or None
        with Progress(TextColumn("KernelBench"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                      transient=True, disable=not (progress and sys.stderr.isatty())) as bar:
            job = bar.add_task("download", total=total)
            try:
                while chunk := response.read(1 << 16):
                    digest.update(chunk)
                    into.write(chunk)
                    bar.advance(job, len(chunk))
            except OSError as e:  # a timeout is one
                raise UsageError(f"kernelbench fetch: the download of {url} broke off ({e}); run it again") from None
    return digest.hexdigest()


def _members(archive: Path) -> Iterator[tuple[PurePosixPath, Any]]:
    """(name, opener) for each regular file of a tar (any compression) or zip archive."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if not info.is_dir():
                    yield PurePosixPath(info.filename), (lambda info=info: z.read(info))
        return
    try:
        with tarfile.open(archive, "r:*") as t:
            for info in t:
                if info.isfile():
                    yield PurePosixPath(info.name), (lambda info=info: t.extractfile(info).read())
    except tarfile.TarError as e:
        raise UsageError(f"kernelbench fetch: the download is neither a tar nor a zip archive ({e})") from None


def _wanted(name: PurePosixPath) -> str | None:
    """``<top>/KernelBench/level1/19_ReLU.py`` -> ``level1/19_ReLU.py``; the top folder's LICENSE -> ``LICENSE``;
    nothing else (no other folder, no path that climbs out)."""
    parts = name.parts
    if ".." in parts or name.is_absolute():
        return None
    if len(parts) >= 3 and parts[-3] == "KernelBench" and parts[-2] in LEVELS and parts[-1].endswith(".py"):
        return f"{parts[-2]}/{parts[-1]}"
    if parts[-1] == "LICENSE" and len(parts) <= 2:
        return "LICENSE"
    return None


def _unpack(archive: Path, staging: Path) -> dict[str, int]:
    problems = dict.fromkeys(LEVELS, 0)
    for name, read in _members(archive):
        target = _wanted(name)
        if target is None:
            continue
        path = staging / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(read())
        if target != "LICENSE":
            problems[target.split("/")[0]] += 1
    if not any(problems.values()):
        raise UsageError("kernelbench fetch: the archive holds no KernelBench/level1/ or KernelBench/level2/ "
                         "problem files (is --url a KernelBench archive?)")
    return problems


def _replace_dir(staging: Path, dest: Path) -> None:
    """``staging`` takes ``dest``'s place; the old one is removed only once the new one is in."""
    old = None
    if dest.exists():
        old = dest.parent / f".{dest.name}.old-{os.getpid()}"
        os.replace(dest, old)
    try:
        os.replace(staging, dest)
    except OSError:
        if old is not None:
            os.replace(old, dest)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def fetch_kernelbench(url: str = PINNED_URL, *, sha256: str | None = None, dest: Path | None = None,
                      timeout_s: float = 120.0, progress: bool = True) -> Fetched:
    """Download, verify and unpack; every failure is one UsageError line and leaves ``dest`` untouched."""
    expected = _checked_sha256(url, sha256)
    dest = (dest or kernelbench_cache_dir()).expanduser().resolve()
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"--dest {dest}: a file is there, not a folder")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--dest {dest}: cannot create its folder ({e.strerror})") from None
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.fetch-", dir=dest.parent) as work:
        archive = Path(work) / "archive"
        with archive.open("wb") as f:
            got = _download(url, f, timeout_s=timeout_s, progress=progress)
        if expected and got != expected:
            raise UsageError(f"kernelbench fetch: {url} has sha256 {got}, expected {expected}: not unpacked, "
                             f"{dest} left as it was (a changed or corrupted archive; check --url and --sha256)")
        staging = Path(work) / "kernelbench"
        staging.mkdir()
        problems = _unpack(archive, staging)
        content = levels_sha256(staging)
        if not expected and content != PINNED_LEVELS_SHA256:
            raise UsageError(f"kernelbench fetch: {url}'s level1/level2 problem files are not the pinned release's "
                             f"(content sha256 {content}, expected {PINNED_LEVELS_SHA256}): {dest} left as it was "
                             "(a changed or corrupted archive; check --url)")
        (staging / SOURCE_FILE).write_text(json.dumps(
            {"url": url, "sha256": got, "levels_sha256": content, "verified": True,
             "verified_by": "archive sha256" if expected else "pinned levels' content", "levels": problems,
             "fetched": datetime.now(UTC).isoformat(timespec="seconds")}, indent=2))
        _replace_dir(staging, dest)
    return Fetched(dest=dest, problems=problems, sha256=got, verified=True)


def cmd_fetch(args: argparse.Namespace) -> int:
    url = args.url or PINNED_URL
    dest = Path(args.dest) if args.dest else None
    fetched = fetch_kernelbench(url, sha256=args.sha256, dest=dest, timeout_s=args.timeout, progress=True)
    counts = ", ".join(f"{level} {n}" for level, n in fetched.problems.items())
    how = "its levels verified as the pinned release's" if url == PINNED_URL and args.sha256 is None else "verified"
    print(f"KernelBench ({counts} problems) in {fetched.dest}; sha256 {fetched.sha256} ({how})")
    found = locate_kernelbench()
    if found.path is not None and found.path.resolve() == fetched.dest:
        print(f"evoforge finds it there: L1/19 now names {fetched.dest}/level1/19_*.py")
    elif fetched.dest == kernelbench_cache_dir().resolve():
        print(f"but {found.describe()} comes first (--kernelbench, a config's kernelbench, EVOFORGE_KERNELBENCH)")
    else:
        print(f"give --kernelbench {fetched.dest}, or set EVOFORGE_KERNELBENCH={fetched.dest}, to use it")
    return 0


def cmd_where(args: argparse.Namespace) -> int:
    print(locate_kernelbench().describe())
    return 0


def add_subparser(sub: Any) -> None:
    p = sub.add_parser("kernelbench", help="fetch KernelBench's problems; say which KernelBench is in use",
                       description="L1/23-style tasks are looked up in KernelBench, found in this order: "
                                   "--kernelbench DIR, kernelbench = \"DIR\" in a campaign config's [campaign], "
                                   "$EVOFORGE_KERNELBENCH, the cache `fetch` unpacks into "
                                   f"({kernelbench_cache_dir()}), ../shared/kernelbench beside a checkout.")
    kb = p.add_subparsers(dest="kernelbench_command", required=True)
    f = kb.add_parser("fetch", help="download KernelBench's levels 1 and 2 into the cache",
                      description=f"Download a KernelBench archive (tar.gz or zip; default: {PINNED_URL}, "
                                  f"ScalingIntelligence/KernelBench at commit {PINNED_COMMIT[:12]}), check it (the "
                                  "pinned release by its problem files, any other by --sha256), and unpack KernelBench/level1 and level2 into the cache, replacing what "
                                  "was there only once the new copy is complete.")
    f.add_argument("--url", help="archive URL (http, https or file://); another URL than the pinned one needs "
                                 "--sha256")
    f.add_argument("--sha256", metavar="HEX",
                   help="the archive's SHA-256; a mismatch unpacks nothing (exit 2). The pinned URL needs none: "
                        "its level1/level2 problem files are checked against the content checksum recorded in "
                        "evoforge, and a mismatch leaves the cache as it was")
    f.add_argument("--dest", metavar="DIR",
                   help=f"where to unpack (default {kernelbench_cache_dir()}, where evoforge looks after "
                        "--kernelbench, a config's kernelbench and $EVOFORGE_KERNELBENCH)")
    f.add_argument("--timeout", type=float, default=120.0, help="seconds without data before giving up (default 120)")
    f.set_defaults(func=cmd_fetch)
    w = kb.add_parser("where", help="which KernelBench L1/23-style tasks come from, and how it was found")
    w.set_defaults(func=cmd_where)

