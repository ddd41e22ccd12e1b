"""Runs packed as archives (issue 35): read in place through diag.parsers.archives, with the same JSON as
the unpacked folder (paths aside), and hostile archives refused with one line, exit 2, nothing written."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.helpers import run_diag

RUNS = Path(__file__).resolve().parents[1] / "samples" / "runs"


def _tar(dest: Path, runs: list[str], *, extra: list[tuple[tarfile.TarInfo, bytes]] = ()) -> Path:  # type: ignore[assignment]
    with tarfile.open(dest, "w:gz" if dest.name.endswith("gz") else "w") as tf:
        for name in runs:
            tf.add(RUNS / name, arcname=name)
        for info, data in extra:
            tf.addfile(info, io.BytesIO(data) if data else None)
    return dest


def _zip(dest: Path, runs: list[str], extra: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in runs:
            for f in sorted((RUNS / name).rglob("*")):
                if f.is_file():
                    zf.write(f, f"{name}/{f.relative_to(RUNS / name)}")
        for arc, data in (extra or {}).items():
            zf.writestr(arc, data)
    return dest


def _unpacked(archive: Path, into: Path) -> Path:
    """The reference: the same archive unpacked (its members' mtimes as the archive keeps them)."""
    with tarfile.open(archive) as tf:
        tf.extractall(into, filter="data")
    return into


def _same(packed: str, unpacked: str, prefix: str, folder: str) -> None:
    assert packed.replace(prefix, folder) == unpacked


def test_tail_json_of_a_tarball_is_the_folders(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "run.tar.gz", ["engine-crash"])
    ref = _unpacked(archive, tmp_path / "unpacked")
    packed = run_diag("tail", "--format", "json", str(archive))
    folder = run_diag("tail", "--format", "json", str(ref / "engine-crash"))
    assert packed.returncode == folder.returncode == 1 and packed.stderr == ""
    doc = json.loads(packed.stdout)
    assert doc["root"] == f"{archive}!/engine-crash"
    assert f"{archive}!/engine-crash/logs/sweep_5044719.log" in {s["path"] for s in doc["sources"]}
    _same(packed.stdout, folder.stdout, f"{archive}!", str(ref))


@pytest.mark.parametrize("name", ["run.zip", "run.tar", "run.tgz"])
def test_zip_tar_and_tgz_read_alike(tmp_path: Path, name: str) -> None:
    archive = (_zip if name.endswith("zip") else _tar)(tmp_path / name, ["healthy"])
    packed = run_diag("tail", "--format", "json", str(archive))
    folder = run_diag("tail", "--format", "json", str(RUNS / "healthy"))
    assert packed.returncode == folder.returncode == 0
    _same(packed.stdout, folder.stdout, f"{archive}!/healthy", str(RUNS / "healthy"))


def test_a_tarball_inside_a_zip_is_read_one_level_deep(tmp_path: Path) -> None:
    inner = _tar(tmp_path / "server_logs.tar.gz", ["healthy"])
    outer = _zip(tmp_path / "artifact.zip", [], {"server_logs.tar.gz": inner.read_bytes()})
    packed = run_diag("tail", "--format", "json", str(outer))
    folder = run_diag("tail", "--format", "json", str(RUNS / "healthy"))
    assert packed.returncode == 0
    _same(packed.stdout, folder.stdout, f"{outer}!/server_logs.tar.gz!/healthy", str(RUNS / "healthy"))


def test_report_and_index_of_two_runs_in_one_archive(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "two.tar.gz", ["healthy", "engine-crash"])
    ref = _unpacked(archive, tmp_path / "unpacked")
    for arg, out in ((archive, "packed.json"), (ref, "folder.json")):
        assert run_diag("report", str(arg), "--format", "json", "-o", str(tmp_path / out)).returncode == 1
    _same((tmp_path / "packed.json").read_text(), (tmp_path / "folder.json").read_text(), f"{archive}!", str(ref))

    runs = {}
    for arg, into in ((archive, "idx-packed"), (ref, "idx-folder")):
        assert run_diag("index", str(arg), "--into", str(tmp_path / into), "-j", "1").returncode == 1
        got = run_diag("runs", str(tmp_path / into), "--format", "json")
        runs[into] = [{k: v for k, v in r.items() if k != "run_id"}   # run_id: a digest of the run's path
                      for r in json.loads(got.stdout.replace(f"{archive}!", str(ref)))["runs"]]
    assert runs["idx-packed"] == runs["idx-folder"] and len(runs["idx-packed"]) == 2


def test_replay_of_a_tarball_ends_as_the_folders(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "run.tar.gz", ["healthy"])
    ref = _unpacked(archive, tmp_path / "unpacked")
    packed = run_diag("watch", "--replay", "run.tar.gz", "--once", "--speed", "1e9", cwd=tmp_path,
                      env={"NO_COLOR": "1"})
    folder = run_diag("watch", "--replay", "healthy", "--once", "--speed", "1e9", cwd=ref,
                      env={"NO_COLOR": "1"})
    assert packed.returncode == folder.returncode == 0
    assert "DIAG-C008" in packed.stdout
    _same(packed.stdout, folder.stdout, "run.tar.gz!/healthy", "healthy")


def _member(name: str, data: bytes = b"", **kw: object) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    return info, data


def _declares_10_gb(dest: Path) -> Path:
    """A member whose header says 10 GB (sparse, its data never written): the archive is a few bytes."""
    info = tarfile.TarInfo("healthy/logs/gb200-r07-n14_decode_w0.out")
    info.size = 10 << 30
    dest.write_bytes(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT) + b"x" * 512))
    return dest


def _zip_bomb(dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("healthy/logs/gb200-r07-n14_decode_w0.out", bytes(32 << 20))
    return dest


HOSTILE = {
    "traversal": (lambda d: _tar(d / "a.tar.gz", ["healthy"], extra=[_member("../evil.out", b"x\n")]),
                  "member ../evil.out leads outside it (..)"),
    "absolute": (lambda d: _tar(d / "a.tar.gz", ["healthy"], extra=[_member("/tmp/evil.out", b"x\n")]),
                 "member /tmp/evil.out has an absolute path"),
    "symlink-out": (lambda d: _tar(d / "a.tar", ["healthy"], extra=[
        _member("healthy/logs/x_decode_w9.out", type=tarfile.SYMTYPE, linkname="../../../etc/passwd")]),
        "link healthy/logs/x_decode_w9.out -> ../../../etc/passwd leads outside it"),
    "10GB-sparse": (lambda d: _declares_10_gb(d / "a.tgz"),
                    "declares 10,737,418,240 bytes (at most 4,294,967,296)"),
    "zip-bomb": (lambda d: _zip_bomb(d / "a.zip"), "more than 200 times: a zip bomb"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_archive_is_refused_with_one_line(tmp_path: Path, case: str) -> None:
    make, why = HOSTILE[case]
    archive = make(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    got = run_diag("tail", "--format", "json", archive.name, cwd=tmp_path)
    assert (got.returncode, got.stdout) == (2, "")
    assert got.stderr.count("\n") == 1 and got.stderr.startswith(f"diag tail: {archive.name}: refused archive")
    assert why in got.stderr and "nothing in it is read" in got.stderr
    assert sorted(tmp_path.rglob("*")) == before and not Path("/tmp/evil.out").exists()


def test_a_hostile_archive_inside_a_good_one_is_skipped_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    bad = HOSTILE["traversal"][0](tmp_path / "bad")
    outer = _zip(tmp_path / "artifact.zip", ["healthy"], {"healthy/extra.tar.gz": bad.read_bytes()})
    got = run_diag("tail", "--format", "json", str(outer))
    assert got.returncode == 0
    skipped = {s["path"]: s["skipped"] for s in json.loads(got.stdout)["sources"] if s["skipped"]}
    assert "leads outside it (..)" in skipped[f"{outer}!/healthy/extra.tar.gz!"]


def test_an_archive_outside_the_mcp_roots_is_refused(tmp_path: Path) -> None:
    from diag.confine import Confined, Limits, Roots
    from diag.files import find_runs
    from diag.parsers.inputs import Refused, reading_through

    (tmp_path / "root").mkdir()
    inside = _tar(tmp_path / "root" / "run.tar.gz", ["healthy"])
    outside = shutil.copy(inside, tmp_path / "out.tar.gz")
    confined = Confined(Roots.open([tmp_path / "root"]), Limits(1 << 30, 60.0))
    with reading_through(confined):
        runs = find_runs([str(inside)])
        assert [r.root for r in runs] == [Path(f"{inside}!/healthy")] and len(runs[0].files) > 10
        assert confined.read > 0   # the archive's bytes counted against --max-read-bytes
        with pytest.raises(Refused):
            find_runs([str(outside)])


def _campaign(tmp_path: Path) -> Path:
    """A campaign folder as CI leaves it: a plain run folder, a run packed as .tar.gz, a hostile archive."""
    camp = tmp_path / "campaign"
    camp.mkdir()
    shutil.copytree(RUNS / "healthy", camp / "healthy")
    _tar(camp / "crash.tar.gz", ["engine-crash"])
    (tmp_path / "bad").mkdir()
    shutil.copy(HOSTILE["traversal"][0](tmp_path / "bad"), camp / "bad.tar.gz")
    return camp


def test_an_archive_in_a_walked_folder_is_a_run_and_a_hostile_one_is_skipped(tmp_path: Path) -> None:
    camp = _campaign(tmp_path)
    roots = [f"{camp}/crash.tar.gz!/engine-crash", f"{camp}/healthy"]
    got = run_diag("tail", "--format", "json", str(camp))
    assert got.returncode == 1, got.stderr
    doc = json.loads(got.stdout)
    assert [r["root"] for r in doc["runs"]] == roots
    crash = json.loads(run_diag("tail", "--format", "json", str(camp / "crash.tar.gz")).stdout)
    assert doc["runs"][0]["postmortem"] == crash["postmortem"] and doc["runs"][0]["findings"] == crash["findings"]
    skipped = {s["path"]: s["skipped"] for r in doc["runs"] for s in r["sources"] if s["skipped"]}
    assert "member ../evil.out leads outside it (..)" in skipped[f"{camp}/bad.tar.gz!"]

    report = run_diag("report", str(camp), "--format", "json")
    assert report.returncode == 1 and [r["root"] for r in json.loads(report.stdout)["runs"]] == roots
    assert run_diag("index", str(camp), "--into", str(tmp_path / "idx"), "-j", "1").returncode == 1
    rows = json.loads(run_diag("runs", str(tmp_path / "idx"), "--format", "json").stdout)["runs"]
    assert sorted(r["path"] for r in rows) == roots
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "campaign", "idx"]   # nothing unpacked


def test_follow_on_an_archive_reads_it_once_as_batch_and_says_so(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "run.tar.gz", ["engine-crash"])
    followed = run_diag("tail", "-f", "--format", "json", str(archive))   # returns: no waiting on a still file
    batch = run_diag("tail", "--format", "json", str(archive))
    assert followed.returncode == batch.returncode == 1 and followed.stdout == batch.stdout
    assert followed.stderr == f"diag tail: {archive}: an archive does not grow; read once, as without --follow\n"


def test_mcp_tail_of_a_tarball_is_the_folders_diagnosis(tmp_path: Path) -> None:
    from test_mcp import serving

    archive = _tar(tmp_path / "run.tar.gz", ["engine-crash"])
    ref = _unpacked(archive, tmp_path / "unpacked")
    with serving([tmp_path]) as server:
        packed = server.ok("tail", paths=["run.tar.gz"])
        folder = server.ok("tail", paths=["unpacked/engine-crash"])
    assert packed["root"] == f"{archive}!/engine-crash" and packed["postmortem"]["owner"] == "engine"
    _same(json.dumps(packed), json.dumps(folder), f"{archive}!", str(ref))
