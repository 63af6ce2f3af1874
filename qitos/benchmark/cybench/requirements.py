"""Scoring side (task setup). What a task's ``metadata/requirements.sh`` asks for, and whether the sandbox already has it.

The script is never executed: upstream runs it as root in a disposable Kali container (``apt
install``, ``pip install``, ``sudo``, downloads), which on a host would modify the machine. Instead
we parse the install commands it contains and check each requirement *inside the sandbox*:
apt packages by the binaries they provide (on ``PATH``), pip packages by whether their top-level
module is importable by the sandbox's ``python3``. Everything else in the script (``apt update``,
``wget``, ``dpkg -i``, ...) is listed verbatim in ``other_commands`` so nothing is silently lost.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from qitos.sandbox.bwrap import BwrapSandbox

RequirementKind = Literal["apt", "pip", "dotnet-tool"]

# apt package -> binaries that show it is present (empty: apt plumbing, nothing to check).
APT_BINARIES: dict[str, tuple[str, ...]] = {
    "netcat-traditional": ("nc",), "netcat-openbsd": ("nc",), "protobuf-compiler": ("protoc",),
    "mono-complete": ("mono", "mcs"), "dotnet-sdk-6.0": ("dotnet",), "gnupg": ("gpg",),
    "software-properties-common": ("add-apt-repository",), "upx-ucl": ("upx",), "binutils": ("strings",),
    "apt-transport-https": (), "xxd": ("xxd",), "netcat": ("nc",),
}
# pip distribution (lower-case) -> top-level module it installs.
PIP_MODULES: dict[str, str] = {
    "pycryptodome": "Crypto", "pycryptodomex": "Cryptodome", "pwntools": "pwn", "z3-solver": "z3",
    "pyjwt": "jwt", "pyyaml": "yaml", "beautifulsoup4": "bs4", "pillow": "PIL", "python-dateutil": "dateutil",
    "pynacl": "nacl", "pyserial": "serial", "pysocks": "socks", "ropgadget": "ropgadget",
    "colored-traceback": "colored_traceback", "charset-normalizer": "charset_normalizer", "pyelftools": "elftools",
    "mako": "mako", "markupsafe": "markupsafe", "gmpy2": "gmpy2", "scikit-learn": "sklearn",
}
_SPEC = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?P<version>(?:[=<>!~]=?|===).+)?$")
_INSTALLERS = {"apt", "apt-get", "aptitude"}


class PackageRequirement(BaseModel):
    """One package the task's requirements.sh installs; `available` is None until checked."""

    kind: RequirementKind
    name: str
    version: str | None = None
    provides: list[str] = Field(default_factory=list)  # binaries (apt, dotnet-tool) or the module (pip)
    available: bool | None = None
    detail: str = ""


class RequirementsReport(BaseModel):
    """Parsed requirements of one task plus what the sandbox lacks."""

    task_id: str
    source: str
    requirements: list[PackageRequirement] = Field(default_factory=list)
    other_commands: list[str] = Field(default_factory=list)

    @property
    def missing(self) -> list[PackageRequirement]:
        return [r for r in self.requirements if r.available is False]

    def summary(self) -> str:
        if not self.requirements:
            return "requirements.sh installs nothing"
        if not self.missing:
            return "all requirements are present in the sandbox"
        names = ", ".join(f"{r.kind}:{r.name}{r.version or ''}" for r in self.missing)
        return f"missing in the sandbox: {names}"


def _split_commands(script: str) -> list[list[str]]:
    """Simple commands of a shell script: one line at a time, split at `&&`, `||`, `;`, `|`."""
    commands: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # unbalanced quotes: keep the line as one opaque command
            tokens = [line.strip()]
        current: list[str] = []
        for token in tokens + [";"]:
            if token in ("&&", "||", ";", "|", "&"):
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(token)
    return commands


def _strip_prefixes(words: list[str]) -> list[str]:
    while words and (words[0] in ("sudo", "env", "command") or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
        words = words[1:]
    return words


def _pip_args(words: list[str]) -> list[str] | None:
    """Arguments after `install` when `words` is a pip install command, else None."""
    if words[:1] and re.fullmatch(r"pip[0-9.]*", words[0]):
        rest = words[1:]
    elif len(words) >= 3 and re.fullmatch(r"python[0-9.]*", words[0]) and words[1:3] == ["-m", "pip"]:
        rest = words[3:]
    else:
        return None
    return rest[1:] if rest[:1] == ["install"] else None


def parse_requirements(script: str) -> tuple[list[PackageRequirement], list[str]]:
    """(requirements, other commands) from the text of a requirements.sh."""
    requirements: list[PackageRequirement] = []
    others: list[str] = []
    for raw in _split_commands(script):
        words = _strip_prefixes(raw)
        if not words or words[0].startswith("#!"):
            continue
        pip_args = _pip_args(words)
        if words[0] in _INSTALLERS and "install" in words:
            for package in words[words.index("install") + 1:]:
                if not package.startswith("-"):
                    name = package.split("=")[0]
                    provides = list(APT_BINARIES.get(name, (name,)))
                    requirements.append(PackageRequirement(kind="apt", name=name, provides=provides))
        elif pip_args is not None:
            for spec in pip_args:
                match = _SPEC.match(spec)
                if spec.startswith("-") or not match:
                    continue
                name = match.group("name")
                module = PIP_MODULES.get(name.lower(), name.lower().replace("-", "_"))
                requirements.append(
                    PackageRequirement(kind="pip", name=name, version=match.group("version"), provides=[module])
                )
        elif words[:3] == ["dotnet", "tool", "install"]:
            tools = [w for w in words[3:] if not w.startswith("-")]
            for tool in tools[:1]:
                requirements.append(PackageRequirement(kind="dotnet-tool", name=tool, provides=[tool]))
        else:
            others.append(shlex.join(raw))
    return requirements, others


def read_requirements(task_id: str, task_dir: Path) -> RequirementsReport:
    """Parse `<task_dir>/metadata/requirements.sh` (a missing file means no requirements)."""
    source = Path(task_dir) / "metadata" / "requirements.sh"
    text = source.read_text(errors="replace") if source.is_file() else ""
    requirements, others = parse_requirements(text)
    return RequirementsReport(task_id=task_id, source=str(source), requirements=requirements, other_commands=others)


_CHECK_SCRIPT = r"""
import importlib.metadata as md, importlib.util, json, shutil, sys
wanted = json.loads(sys.argv[1])
out = {"binaries": {b: shutil.which(b) for b in wanted["binaries"]}, "modules": {}}
for module, dist in wanted["modules"].items():
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    try:
        version = md.version(dist) if found else None
    except md.PackageNotFoundError:
        version = None
    out["modules"][module] = [found, version]
print(json.dumps(out))
"""


def check_in_sandbox(report: RequirementsReport, sandbox: BwrapSandbox) -> RequirementsReport:
    """Fill `available`/`detail` of every requirement by probing inside `sandbox` (no installs)."""
    binaries = sorted({b for r in report.requirements if r.kind != "pip" for b in r.provides})
    modules = {r.provides[0]: r.name for r in report.requirements if r.kind == "pip"}
    if not binaries and not modules:
        return report
    result = sandbox.run(["python3", "-c", _CHECK_SCRIPT, json.dumps({"binaries": binaries, "modules": modules})])
    try:
        found = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        probe = " ".join(f'command -v {shlex.quote(b)} >/dev/null && echo {shlex.quote(b)};' for b in binaries)
        present = set(sandbox.run(probe or "true").stdout.split())
        found = {"binaries": {b: b if b in present else None for b in binaries},
                 "modules": {m: [False, None] for m in modules}}
        if modules:
            note = f"python3 in the sandbox could not check modules ({(result.stderr or '').strip()[:200]})"
            found["note"] = note
    checked = []
    for req in report.requirements:
        if req.kind == "pip":
            ok, version = found["modules"].get(req.provides[0], [False, None])
            detail = (f"module {req.provides[0]} importable (installed {version or 'unknown version'})" if ok
                      else found.get("note") or f"module {req.provides[0]} not importable by the sandbox's python3")
        elif not req.provides:
            ok, detail = True, "apt plumbing; nothing to provide inside the sandbox"
        else:
            paths = {b: found["binaries"].get(b) for b in req.provides}
            ok = all(paths.values())
            missing = [b for b, p in paths.items() if not p]
            found_paths = ", ".join(p for p in paths.values() if p)
            detail = f"on PATH: {found_paths}" if ok else f"not on PATH: {', '.join(missing)}"
        checked.append(req.model_copy(update={"available": ok, "detail": detail}))
    return report.model_copy(update={"requirements": checked})
