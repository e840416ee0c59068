"""A real PostgreSQL server for tests and benchmarks: initdb in a temporary folder, postgres
on 127.0.0.1 on a free port, password authentication, stopped (and the folder removed) when
done. Found through ``pg_config --bindir`` or /usr/lib/postgresql/*/bin; ``.ci/run`` installs
Debian's ``postgresql`` where it is missing. initdb refuses to run as root, so as root the
server runs as the unprivileged user ``nobody`` in a folder it owns.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass

USER = "postgres"
PASSWORD = "sf-pg-secret-do-not-leak"


def find_bindir() -> str | None:
    """The folder of initdb, pg_ctl and postgres, or None when PostgreSQL is not installed."""
    candidates = []
    if shutil.which("pg_config"):
        try:
            out = subprocess.run(
                ["pg_config", "--bindir"], capture_output=True, text=True, timeout=10
            )
            candidates.append(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if all(os.access(os.path.join(folder, b), os.X_OK) for b in ("initdb", "pg_ctl")):
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresServer:
    """A running server; ``conninfo`` connects as the superuser with its password."""

    bindir: str
    folder: str
    port: int
    run_as: list[str]

    @property
    def conninfo(self) -> str:
        return (
            f"host=127.0.0.1 port={self.port} user={USER} password={PASSWORD} "
            "dbname=postgres connect_timeout=10"
        )

    @property
    def url(self) -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/postgres"

    def _pg_ctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        command = [*self.run_as, os.path.join(self.bindir, "pg_ctl"), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)

    def stop(self) -> None:
        try:
            self._pg_ctl(
                "-D", os.path.join(self.folder, "data"), "stop", "-m", "immediate", timeout=60
            )
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def start(bindir: str) -> PostgresServer:
    """initdb and start a server; raises RuntimeError with the server's log on failure."""
    folder = tempfile.mkdtemp(prefix="shardflow-pg-")
    run_as: list[str] = []
    if os.geteuid() == 0:
        import pwd

        nobody = pwd.getpwnam("nobody")
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        runuser = shutil.which("runuser") or shutil.which("setpriv")
        if runuser is None:
            raise RuntimeError("running PostgreSQL as root needs runuser or setpriv")
        if runuser.endswith("runuser"):
            run_as = [runuser, "-u", "nobody", "--"]
        else:
            run_as = [
                runuser,
                f"--reuid={nobody.pw_uid}",
                f"--regid={nobody.pw_gid}",
                "--clear-groups",
            ]
    pwfile = os.path.join(folder, "pw")
    with open(pwfile, "w") as f:
        f.write(PASSWORD + "\n")
    if run_as:
        os.chown(pwfile, os.stat(folder).st_uid, os.stat(folder).st_gid)
    data = os.path.join(folder, "data")
    init = subprocess.run(
        [*run_as, os.path.join(bindir, "initdb"), "-D", data, "-U", USER, "--pwfile", pwfile,
         "-A", "scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    if init.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"initdb failed:\n{init.stdout}\n{init.stderr}")
    server = None
    for _ in range(3):  # a free port may be taken before postgres binds it
        port = _free_port()
        server = PostgresServer(bindir, folder, port, run_as)
        options = (
            f"-h 127.0.0.1 -p {port} -k {folder} -F -c max_connections=60 "
            "-c shared_buffers=32MB -c synchronous_commit=off"
        )
        log = os.path.join(folder, "log")
        started = server._pg_ctl("-D", data, "-o", options, "-l", log, "-w", "-t", "60", "start")
        if started.returncode == 0:
            return server
    text = (
        open(os.path.join(folder, "log")).read()
        if os.path.exists(os.path.join(folder, "log"))
        else ""
    )
    shutil.rmtree(folder, ignore_errors=True)
    raise RuntimeError(f"postgres did not start:\n{text[-3000:]}")


def run(connect, *statements, params=None):
    """Run statements in one transaction through ``connect()``; the rows of the last one."""
    with connect() as connection:
        cursor = connection.cursor()
        for statement in statements:
            cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else None
