"""A real PostgreSQL server for the tests: initdb in a temporary folder, started with pg_ctl on a
free port of 127.0.0.1 (password logins, scram-sha-256), stopped and removed at the end.

The binaries come from PATH or Debian's /usr/lib/postgresql/<version>/bin (the package that
scripts/install_postgres.sh installs). PostgreSQL refuses to run as root: as root the server runs
as the ``postgres`` system user (runuser).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "postgres"
SUPERUSER_PASSWORD = "super-secret-0"
USER = "infer"
PASSWORD = "pw-Zq8r1x"  # a test asserts that it never shows in output or result files


def find_bindir() -> Path | None:
    """The folder holding initdb and pg_ctl, or None."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    dirs = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda d: int(Path(d).parent.name) if Path(d).parent.name.isdigit() else 0,
    )
    for d in reversed(dirs):
        if (Path(d) / "initdb").is_file() and (Path(d) / "pg_ctl").is_file():
            return Path(d)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    bindir: Path
    root: Path
    port: int
    _prefix: list[str]
    _dbs: int = 0
    _opts: str = ""

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, db: str, *, user: str = USER, password: str | None = PASSWORD) -> str:
        auth = f"{user}:{password}" if password is not None else user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}"

    def admin(self, sql: str, db: str = "postgres") -> None:
        """Run SQL as the superuser (autocommit: CREATE DATABASE allowed)."""
        import psycopg

        with psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=SUPERUSER,
            password=SUPERUSER_PASSWORD,
            dbname=db,
            autocommit=True,
        ) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def new_database(self) -> str:
        """A fresh empty database owned by the test user; returns its name."""
        self._dbs += 1
        name = f"t{os.getpid()}_{self._dbs}"
        self.admin(f'CREATE DATABASE "{name}" OWNER {USER}')
        return name

    def halt(self) -> None:
        """Stop the server (fast shutdown: open connections are cut), keeping its data, as a
        restart or an outage does; :meth:`resume` starts it again."""
        self._ctl("-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the server again after :meth:`halt`, on the same port and data."""
        self._ctl("-l", str(self.root / "log"), "-o", self._opts, "-w", "-t", "60", "start")

    def _ctl(self, *args: str) -> None:
        p = subprocess.run(
            [*self._prefix, str(self.bindir / "pg_ctl"), "-D", str(self.data), *args],
            capture_output=True,
            text=True,
            timeout=90,
        )
        if p.returncode != 0:
            raise RuntimeError(f"pg_ctl {' '.join(args)} failed: {p.stdout}{p.stderr}")

    def stop(self) -> None:
        subprocess.run(
            [
                *self._prefix,
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def start() -> PgServer:
    """Initialise and start a server; raises RuntimeError (with the log) when it cannot."""
    bindir = find_bindir()
    if bindir is None:
        raise FileNotFoundError("no PostgreSQL binaries (initdb, pg_ctl)")
    root = Path(tempfile.mkdtemp(prefix="infer-prof-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        os.chmod(root, 0o700)
        prefix = ["runuser", "-u", "postgres", "--"]
    pwfile = root / "pwfile"
    pwfile.write_text(SUPERUSER_PASSWORD + "\n")
    if prefix:
        pw = pwd.getpwnam("postgres")
        os.chown(pwfile, pw.pw_uid, pw.pw_gid)
    port = free_port()
    server = PgServer(bindir, root, port, prefix)

    def run(*args: str) -> None:
        p = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            log = (root / "log").read_text() if (root / "log").exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed: {p.stdout}{p.stderr}{log}")

    run(
        str(bindir / "initdb"),
        "-D",
        str(server.data),
        "-U",
        SUPERUSER,
        f"--pwfile={pwfile}",
        "--auth-local=scram-sha-256",
        "--auth-host=scram-sha-256",
        "-E",
        "UTF8",
        "--no-locale",
    )
    for attempt in range(3):  # the free port can be taken before the server binds it: retry
        opts = (
            f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=100 "
            "-c fsync=off -c full_page_writes=off"
        )
        server._opts = opts
        try:
            run(
                str(bindir / "pg_ctl"),
                "-D",
                str(server.data),
                "-l",
                str(root / "log"),
                "-o",
                opts,
                "-w",
                "-t",
                "60",
                "start",
            )
            break
        except RuntimeError as exc:
            if attempt == 2 or "Address already in use" not in str(exc):
                raise
            server.port = free_port()
    deadline = time.monotonic() + 30
    while True:
        try:
            server.admin(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")
            break
        except Exception:
            if time.monotonic() > deadline:
                server.stop()
                raise
            time.sleep(0.2)
    return server
