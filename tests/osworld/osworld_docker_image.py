"""A local Docker image standing in for OSWorld's VM runner image: a minimal root filesystem made from this host's
Debian Python (interpreter, standard library, the shared libraries they load, /bin/sh and a few tools) plus the test
controller (`osworld_vm_controller.py`), imported with `docker import` (no registry). Its controller serves
`/` as the VM filesystem on port 5000, as the OSWorld VM does.

The image is tagged by the hash of its inputs and built once; later test runs reuse it.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import tarfile
from pathlib import Path

PYTHON = Path("/usr/bin/python3.11")
STDLIB = Path("/usr/lib/python3.11")
TOOLS = ["/bin/sh", "/bin/dash", "/bin/ls", "/bin/cat", "/bin/echo", "/bin/mkdir", "/bin/sleep", "/usr/bin/env"]
SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data", "__pycache__",
        "site-packages", "dist-packages", "config-3.11-x86_64-linux-gnu"}
CONTROLLER = Path(__file__).with_name("osworld_vm_controller.py")


def available() -> bool:
    return PYTHON.is_file() and (STDLIB / "lib-dynload").is_dir()


def _libraries(binaries: list[Path]) -> set[Path]:
    """Shared libraries (and the dynamic loader) the binaries need, from `ldd`."""
    found: set[Path] = set()
    for binary in binaries:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
        for match in re.finditer(r"(/\S+\.so[^\s]*)", out):
            found.add(Path(match.group(1)))
    return found


def _files() -> list[Path]:
    stdlib = [p for p in STDLIB.rglob("*") if p.is_file() and not (set(p.relative_to(STDLIB).parts) & SKIP)]
    tools = [Path(t) for t in TOOLS if Path(t).exists()]
    binaries = [PYTHON, *tools, *(p for p in stdlib if p.suffix == ".so")]
    return sorted({*stdlib, *tools, PYTHON, *_libraries(binaries)})


def _add(tar: tarfile.TarFile, path: Path, arcname: str | None = None) -> None:
    real = path.resolve()
    info = tar.gettarinfo(str(real), arcname=(arcname or str(path)).lstrip("/"))
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    with real.open("rb") as fh:
        tar.addfile(info, fh)


def _text(tar: tarfile.TarFile, arcname: str, text: str, mode: int = 0o644) -> None:
    data = text.encode()
    info = tarfile.TarInfo(arcname)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _directory(tar: tarfile.TarFile, arcname: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(arcname)
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def _link(tar: tarfile.TarFile, arcname: str, target: str) -> None:
    info = tarfile.TarInfo(arcname)
    info.type, info.linkname = tarfile.SYMTYPE, target
    tar.addfile(info)


def build_rootfs(dest: Path) -> Path:
    files = _files()
    with tarfile.open(dest, "w") as tar:
        for name in ("tmp", "home/user/Desktop", "root", "srv", "etc", "usr/bin", "bin"):
            _directory(tar, name, 0o1777 if name == "tmp" else 0o755)
        for path in files:
            if path.is_relative_to("/bin") or path.is_relative_to("/usr/bin"):
                _add(tar, path, str(path))
            else:
                _add(tar, path)
        _link(tar, "usr/bin/python3", "python3.11")
        _link(tar, "usr/bin/python", "python3.11")
        _text(tar, "etc/passwd", "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n")
        _text(tar, "etc/group", "root:x:0:\nuser:x:1000:\n")
        _add(tar, CONTROLLER, "srv/osworld_vm_controller.py")
    return dest


def image_tag() -> str:
    digest = hashlib.sha256(CONTROLLER.read_bytes() + PYTHON.read_bytes()[:4096] + str(os.stat(PYTHON).st_size).encode())
    return f"qitos-test/osworld-vm:{digest.hexdigest()[:12]}"


def ensure_image(workdir: Path) -> str:
    """Build and `docker import` the test image unless this version is already there; returns its tag."""
    tag = image_tag()
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    rootfs = build_rootfs(workdir / "osworld-vm-rootfs.tar")
    command = 'CMD ["/usr/bin/python3", "/srv/osworld_vm_controller.py", "--port", "5000", "--root", "/"]'
    subprocess.run(["docker", "import", "--change", command, "--change", "ENV HOME=/home/user",
                    "--change", "WORKDIR /home/user", str(rootfs), tag], check=True, capture_output=True)
    rootfs.unlink()
    return tag
