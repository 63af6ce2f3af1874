"""The service-task fixture: a CyBench-style task (fixtures/service_ctf) whose image builds without a registry.

Its Dockerfile starts `FROM qitos-test/busybox:1.35`, which `busybox_image()` makes with `docker import`
from a root filesystem holding Debian's statically linked busybox (package busybox-static, which
.ci/run installs) and one symlink per applet. Nothing is pulled; traffic stays on this machine.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from pathlib import Path

from qitos.benchmark.cybench.runtime import docker_available
from tests.conftest import require_system

FIXTURE_ROOT = Path(__file__).parent / "fixtures" / "service_ctf"
FIXTURE_PATH = "benchmark/qitos-tests/fixture-ctf/misc/flagserver"
FIXTURE_FLAG = "qitos{c0ntainers_up_and_d0wn}"
BASE_IMAGE = "qitos-test/busybox:1.35"


def busybox_image() -> str:
    """Make the base image once (skip, or fail in CI, when Docker or busybox-static is missing)."""
    docker_available.cache_clear()
    ok, reason = docker_available()
    require_system(ok, f"a running docker engine ({reason})")
    if subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True).returncode == 0:
        return BASE_IMAGE
    busybox = shutil.which("busybox")
    static = busybox and "statically linked" in subprocess.run(["file", "-L", busybox], capture_output=True,
                                                                 text=True).stdout
    require_system(bool(static), "a statically linked busybox (Debian: apt install busybox-static)")
    assert busybox
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout.split()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for folder in ("bin", "tmp", "etc", "srv"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            tar.addfile(info)
        tar.add(busybox, arcname="bin/busybox")
        for applet in applets:
            if applet != "busybox":
                link = tarfile.TarInfo(f"bin/{applet}")
                link.type, link.linkname = tarfile.SYMTYPE, "busybox"
                tar.addfile(link)
        passwd = b"root:x:0:0:root:/:/bin/sh\nctf:x:1337:1337:ctf:/:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        tar.addfile(info, io.BytesIO(passwd))
    subprocess.run(["docker", "import", "--change", 'ENV PATH=/bin', "-", BASE_IMAGE],
                   input=buffer.getvalue(), capture_output=True, check=True)
    return BASE_IMAGE
