"""``evoforge kernelbench fetch`` against a real HTTP server on loopback, serving archives built here from the
checkout's KernelBench copy in the layout of a GitHub archive (``KernelBench-<commit>/KernelBench/level1/...``).

What a user would notice: the levels land in the cache and L1/19 is found there; a checksum that does not match
is one line, exit 2, and leaves the cache as it was with nothing half-written beside it; a URL of their own needs
its checksum; a zip works as a tar.gz does.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from tests.conftest import kernelbench_dir
from tests.evoforge.test_kernelbench_location import evoforge, fake_kernelbench, one_line_error

TOP = "KernelBench-0123456789abcdef"


def archive_files() -> dict[str, bytes]:
    """The archive's members: levels 1 and 2 under KernelBench/, the licence at the top, and what fetch leaves
    out (another level, a script, a path that climbs out)."""
    files = {f"{TOP}/LICENSE": b"MIT License (test copy)\n", f"{TOP}/README.md": b"not unpacked\n",
             f"{TOP}/KernelBench/level3/1_MLP.py": b"not unpacked\n", f"{TOP}/scripts/run.py": b"not unpacked\n",
             f"{TOP}/KernelBench/../../escape/level1/x.py": b"never written\n"}
    for level in ("level1", "level2"):
        for path in sorted((kernelbench_dir() / level).glob("*.py")):
            files[f"{TOP}/KernelBench/{level}/{path.name}"] = path.read_bytes()
    return files


def tar_gz(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """http.server in a thread on 127.0.0.1, serving a tar.gz, a zip and an archive without levels."""
    root = tmp_path_factory.mktemp("served")
    files = archive_files()
    (root / "kb.tar.gz").write_bytes(tar_gz(files))
    (root / "kb.zip").write_bytes(zip_bytes(files))
    (root / "other.tar.gz").write_bytes(tar_gz({f"{TOP}/README.md": b"no levels here\n"}))
    relu = f"{TOP}/KernelBench/level1/19_ReLU.py"
    (root / "tampered.tar.gz").write_bytes(tar_gz({**files, relu: files[relu].replace(b"torch.relu(x)",
                                                                                       b"torch.relu(x) * 0")}))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    sums = {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in ("kb.tar.gz", "kb.zip",
                                                                                      "other.tar.gz")}
    try:
        yield url, sums
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_fetch_unpacks_levels_1_and_2_into_the_cache_where_tasks_are_then_found(server, tmp_path):
    url, sums = server
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = evoforge("kernelbench", "fetch", "--url", f"{url}/kb.tar.gz", "--sha256", sums["kb.tar.gz"],
                    cwd=tmp_path, env=cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dest = tmp_path / "cache" / "evoforge" / "kernelbench"
    assert f"level1 100, level2 100 problems) in {dest}" in proc.stdout and "(verified)" in proc.stdout
    assert "evoforge finds it there" in proc.stdout
    assert sorted(p.name for p in dest.iterdir()) == ["LICENSE", "SOURCE.json", "level1", "level2"]
    assert (dest / "level1" / "19_ReLU.py").read_bytes() == (kernelbench_dir() / "level1" / "19_ReLU.py").read_bytes()
    assert not (tmp_path / "escape").exists() and not (tmp_path / "cache" / "evoforge" / "escape").exists()
    source = json.loads((dest / "SOURCE.json").read_text())
    assert source["url"] == f"{url}/kb.tar.gz" and source["sha256"] == sums["kb.tar.gz"] and source["verified"]
    # then, from any folder, with nothing set: L1/19 is the cache's
    where = evoforge("kernelbench", "where", cwd=tmp_path, env=cache)
    assert where.stdout.strip() == f"KernelBench {dest} (the cache of `evoforge kernelbench fetch`)"
    line = one_line_error(evoforge("eval", "L1/999", "k.py", cwd=tmp_path, env=cache))
    assert f"({dest}/level1, from the cache of `evoforge kernelbench fetch`); nearest: L1/98" in line
    # a second fetch replaces the copy whole (a stale file of the first does not survive)
    (dest / "level1" / "999_stale.py").write_text("stale\n")
    again = evoforge("kernelbench", "fetch", "--url", f"{url}/kb.zip", "--sha256", sums["kb.zip"], cwd=tmp_path,
                     env=cache)
    assert again.returncode == 0, again.stderr
    assert not (dest / "level1" / "999_stale.py").exists() and len(list((dest / "level2").glob("*.py"))) == 100
    assert [p.name for p in dest.parent.iterdir()] == ["kernelbench"]  # nothing left beside it


def test_a_checksum_mismatch_writes_nothing(server, tmp_path):
    url, sums = server
    dest = fake_kernelbench(tmp_path / "cache" / "evoforge" / "kernelbench")
    before = sorted(p.relative_to(dest) for p in dest.rglob("*"))
    wrong = "0" * 64
    line = one_line_error(evoforge("kernelbench", "fetch", "--url", f"{url}/kb.tar.gz", "--sha256", wrong,
                                   cwd=tmp_path, env={"XDG_CACHE_HOME": str(tmp_path / "cache")}))
    assert f"has sha256 {sums['kb.tar.gz']}, expected {wrong}" in line and "left as it was" in line
    assert sorted(p.relative_to(dest) for p in dest.rglob("*")) == before
    assert [p.name for p in dest.parent.iterdir()] == ["kernelbench"]  # no temporary file or folder left


@pytest.mark.parametrize(("argv", "words"), [
    (["--url", "{url}/kb.tar.gz"], ["--url", "give --sha256 HEX"]),
    (["--url", "{url}/kb.tar.gz", "--sha256", "abc"], ["--sha256 'abc'", "64 hexadecimal digits"]),
    (["--url", "{url}/missing.tar.gz", "--sha256", "0" * 64], ["HTTP 404"]),
    (["--url", "{url}/other.tar.gz", "--sha256", "{other}"], ["no KernelBench/level1/ or KernelBench/level2/"]),
])
def test_user_mistakes_are_one_line(server, tmp_path, argv, words):
    url, sums = server
    argv = [a.format(url=url, other=sums["other.tar.gz"]) for a in argv]
    line = one_line_error(evoforge("kernelbench", "fetch", *argv, "--dest", str(tmp_path / "kb"), cwd=tmp_path))
    for word in words:
        assert word in line, (word, line)
    assert list(tmp_path.iterdir()) == []  # no --dest folder, no temporary file left


def test_the_pinned_release_is_checked_by_its_problem_files(server, tmp_path, monkeypatch, capsys):
    """The default URL needs no --sha256: the levels it unpacks are checked against the content checksum recorded in
    evoforge (GitHub makes a commit's archive on request, so its compressed bytes may change while its files do
    not: a tar.gz and a zip of the same files both pass). Adversarial: the same archive with one problem file
    changed (L1/19's ReLU made to return zeros) fails, exit 2, and leaves the cache as it was."""
    from evoforge import kernelbench_fetch
    from evoforge.cli import main

    url, _ = server
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    dest = tmp_path / "cache" / "evoforge" / "kernelbench"
    for name in ("kb.tar.gz", "kb.zip"):
        monkeypatch.setattr(kernelbench_fetch, "PINNED_URL", f"{url}/{name}")
        assert main(["kernelbench", "fetch"]) == 0
        assert "(its levels verified as the pinned release's)" in capsys.readouterr().out
        assert json.loads((dest / "SOURCE.json").read_text())["verified_by"] == "pinned levels' content"
    before = (dest / "level1" / "19_ReLU.py").read_bytes()
    monkeypatch.setattr(kernelbench_fetch, "PINNED_URL", f"{url}/tampered.tar.gz")
    assert main(["kernelbench", "fetch"]) == 2
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("evoforge:")]
    assert len(said) == 1 and "not the pinned release's" in said[0], said
    assert (dest / "level1" / "19_ReLU.py").read_bytes() == before
    assert [p.name for p in dest.parent.iterdir()] == ["kernelbench"]  # nothing half-written beside it


def test_the_recorded_content_checksum_is_the_checkouts_kernelbench():
    """The pinned checksum is that of the KernelBench copy the tests and the committed results use."""
    from evoforge.kernelbench_fetch import PINNED_LEVELS_SHA256, levels_sha256

    assert levels_sha256(kernelbench_dir()) == PINNED_LEVELS_SHA256


def test_help_says_what_is_verified(tmp_path):
    text = " ".join(evoforge("kernelbench", "fetch", "--help", cwd=tmp_path).stdout.split())
    assert "ScalingIntelligence/KernelBench" in text and "needs --sha256" in text and "content checksum" in text


def test_the_pinned_url_is_a_fixed_commit():
    from evoforge.kernelbench_fetch import PINNED_COMMIT, PINNED_URL

    assert len(PINNED_COMMIT) == 40 and PINNED_URL.endswith(f"/archive/{PINNED_COMMIT}.tar.gz")
    assert Path(PINNED_URL).name != "main.tar.gz"
