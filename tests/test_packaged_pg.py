"""The fixtures' third server: a throwaway cluster from a distribution's binaries."""

import asyncio
import os
import subprocess
from pathlib import Path

import asyncpg
import pytest

from queen_timers.testing.packaged_pg import (
    PACKAGED_ROOT,
    SERVER_USER,
    PackagedPostgres,
    find_pg_bin,
)


def _fake_server(root: Path, major: str) -> Path:
    bin_dir = root / major / "bin"
    bin_dir.mkdir(parents=True)
    for b in ("initdb", "pg_ctl", "postgres"):
        (bin_dir / b).touch()
    return bin_dir


def test_auto_finds_the_newest_packaged_server(tmp_path):
    _fake_server(tmp_path, "9")
    newest = _fake_server(tmp_path, "15")
    _fake_server(tmp_path, "14")
    (tmp_path / "16").mkdir()  # a client-only package: no server binary
    assert find_pg_bin("auto", tmp_path) == newest


def test_auto_without_a_packaged_server_says_how_to_get_one(tmp_path):
    with pytest.raises(RuntimeError, match="apt-get install postgresql-15"):
        find_pg_bin("auto", tmp_path)


def test_a_bin_dir_without_the_server_names_what_is_missing(tmp_path):
    with pytest.raises(RuntimeError, match="no initdb, pg_ctl, postgres in"):
        find_pg_bin(str(tmp_path))


def _packaged_bin() -> Path | None:
    try:
        return find_pg_bin(os.environ.get("QUEEN_TEST_PG_BIN") or "auto")
    except RuntimeError:
        return None


def _major(bin_dir: Path) -> int:
    out = subprocess.run([bin_dir / "postgres", "--version"], capture_output=True, text=True)
    return int(out.stdout.split()[-1].split(".")[0])


needs_packaged = pytest.mark.skipif(
    _packaged_bin() is None, reason=f"no packaged PostgreSQL server under {PACKAGED_ROOT}"
)


@needs_packaged
def test_a_cluster_starts_on_its_own_socket_and_leaves_nothing_behind():
    bin_dir = _packaged_bin()
    assert bin_dir is not None
    pg = PackagedPostgres(bin_dir)
    url = pg.start()
    root = pg.root
    assert root is not None and len(str(root)) < 40  # the socket path stays short
    try:
        if os.geteuid() == 0:  # PostgreSQL refuses root: the server user owns the cluster
            assert root.owner() == SERVER_USER

        async def version() -> int:
            conn = await asyncpg.connect(url)
            try:
                return int(await conn.fetchval("SHOW server_version_num"))
            finally:
                await conn.close()

        assert asyncio.run(version()) // 10000 == _major(bin_dir)
    finally:
        pg.stop()
    assert not root.exists()
    pg.stop()  # twice is harmless


@pytest.mark.skipif(
    not os.environ.get("QUEEN_TEST_PG_BIN") or bool(os.environ.get("QUEEN_TEST_DATABASE_URL")),
    reason="the suite runs on the embedded server (QUEEN_TEST_PG_BIN unset)",
)
async def test_the_suite_runs_on_the_server_named_by_queen_test_pg_bin(conn):
    bin_dir = _packaged_bin()
    assert bin_dir is not None
    assert int(await conn.fetchval("SHOW server_version_num")) // 10000 == _major(bin_dir)
