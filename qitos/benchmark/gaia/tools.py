"""Agent side: the GAIA recipe's toolset: files, sandboxed Python, and (when configured) the web.

Every tool is a closure bound to one task's work dir, so paths the model passes are
resolved there and cannot escape it. Attachments are copied into the work dir first,
which is also the only folder `run_python`'s sandbox can see (and write). That code can plant
symbolic links there, so no tool reads, lists or writes through a link that leaves the work
dir: paths are checked with every link resolved, and downloads are created new (O_EXCL,
O_NOFOLLOW) in a folder opened without following a link.
"""

from __future__ import annotations

import mimetypes
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import httpx

from qitos.core.tools import Tool, tool

from qitos.benchmark.gaia.files import DEFAULT_MAX_CHARS, UnsupportedFileType, extract_zip_safely, read_attachment, truncate
from qitos.benchmark.gaia.web import VISIT_UNAVAILABLE, WebConfig, WebRefused, fetch_page, html_to_text, search_web, visit_client

__all__ = ["GAIA_TOOL_NAMES", "gaia_tools", "prepare_work_dir", "format_sandbox_result"]

GAIA_TOOL_NAMES = ("read_file", "list_files", "extract_zip", "run_python", "web_search", "visit_page")
MAX_LISTED_FILES = 500
_TEXT_TYPES = ("application/json", "application/ld+json", "application/xml", "application/javascript")


def prepare_work_dir(work_dir: Path, attachments: list[Path]) -> list[Path]:
    """Create `work_dir` and copy each attachment into it (unless already inside); returns the copies."""
    work_dir = Path(work_dir).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    copies: list[Path] = []
    for attachment in attachments:
        source = Path(attachment).resolve()
        if not source.is_file():
            raise FileNotFoundError(f"attachment {source} does not exist")
        if source.is_relative_to(work_dir):
            copies.append(source)
            continue
        target = work_dir / source.name
        if not target.exists():
            shutil.copy2(source, target)
        copies.append(target)
    return copies


def format_sandbox_result(result: Any) -> str:
    """Render a SandboxResult as the text the model reads."""
    lines = [f"exit code: {'none (killed)' if result.exit_code is None else result.exit_code}"]
    if result.stdout:
        lines += ["--- stdout ---", result.stdout.rstrip("\n")]
    if result.stderr:
        lines += ["--- stderr ---", result.stderr.rstrip("\n")]
    if not result.stdout and not result.stderr:
        lines.append("(no output; print() what you want to see)")
    if result.timed_out:
        lines.append(f"[timed out after {result.duration_seconds:.1f} s; the process was killed]")
    if result.truncated:
        lines.append("[output truncated]")
    return "\n".join(lines)


def _interpreter_binds() -> tuple[str, ...]:
    """Read-only binds that make this interpreter (and its venv's packages) usable in the sandbox."""
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent}
    covered = {Path("/usr"), Path("/bin"), Path("/lib"), Path("/lib64")}
    binds: list[Path] = []
    for prefix in sorted(prefixes, key=lambda p: len(p.parts)):
        if not any(prefix.is_relative_to(c) for c in covered):
            binds.append(prefix)
            covered.add(prefix)
    return tuple(str(p) for p in binds)


def gaia_tools(
    work_dir: Path,
    attachments: list[Path] | None = None,
    web: WebConfig | None = None,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    python_timeout_seconds: int = 60,
    sandbox: Any = None,
    http_client: httpx.Client | None = None,
) -> list[Tool]:
    """Build the six GAIA tools bound to `work_dir` (attachments are copied in first).

    `web=None` keeps `web_search` and `visit_page` in the manifest but makes them answer
    that web access is off. `sandbox` and `http_client` may be injected (tests, custom
    isolation); by default a `BwrapSandbox` without network is created on first use.
    """
    root = Path(work_dir).resolve()
    prepare_work_dir(root, list(attachments or []))
    state: dict[str, Any] = {"sandbox": sandbox, "client": http_client, "visit_client": http_client}

    def resolve(path: str) -> Path:
        candidate = Path(path).expanduser()
        full = (candidate if candidate.is_absolute() else root / candidate).resolve()
        if not full.is_relative_to(root):
            raise PermissionError(f"path '{path}' is outside the task's work dir; use paths relative to it")
        return full

    def relative(path: Path) -> str:
        return str(path.relative_to(root)) or "."

    @tool(read_only=True)
    def read_file(path: str, offset: int = 0) -> str:
        """Read a file from the work dir as text: documents, spreadsheets, slides, PDFs, JSON,
        images' metadata and zip listings.

        Args:
            path: File path relative to the work dir, e.g. the attachment's name.
            offset: Character offset to start from, to continue a truncated read.
        """
        target = resolve(path)
        if target.is_dir():
            raise IsADirectoryError(f"'{path}' is a directory; use list_files to see what it holds")
        if not target.exists():
            raise FileNotFoundError(f"no file '{path}' in the work dir; use list_files to see what exists")
        try:
            return read_attachment(target, max_chars=max_chars, offset=max(0, offset))
        except UnsupportedFileType as exc:
            return str(exc)

    @tool(read_only=True)
    def list_files(path: str = ".") -> str:
        """List the files under a folder of the work dir, with their sizes in bytes.

        Args:
            path: Folder relative to the work dir; "." for the work dir itself.
        """
        folder = resolve(path)
        if not folder.is_dir():
            raise NotADirectoryError(f"'{path}' is not a folder in the work dir")
        entries = sorted(p for p in folder.rglob("*") if p.is_file() and p.resolve().is_relative_to(root))
        lines = [f"{relative(p)} ({p.stat().st_size} bytes)" for p in entries[:MAX_LISTED_FILES]]
        if len(entries) > MAX_LISTED_FILES:
            lines.append(f"[... {len(entries) - MAX_LISTED_FILES} more files not shown]")
        return "\n".join(lines) if lines else f"no files under '{path}'"

    @tool
    def extract_zip(path: str, destination: str = "") -> str:
        """Extract a zip archive inside the work dir and list the extracted files.

        Args:
            path: The zip file, relative to the work dir.
            destination: Folder to extract into (relative); defaults to a folder named after the archive.
        """
        archive = resolve(path)
        if not archive.is_file():
            raise FileNotFoundError(f"no file '{path}' in the work dir")
        target = resolve(destination or archive.stem)
        files = extract_zip_safely(archive, target)
        listing = "\n".join(f"{relative(f)} ({f.stat().st_size} bytes)" for f in files)
        return f"extracted {len(files)} file(s) into {relative(target)}/:\n{listing}"

    def get_sandbox() -> Any:
        if state["sandbox"] is None:
            from qitos.sandbox.bwrap import BwrapSandbox

            state["sandbox"] = BwrapSandbox(root, network=False, timeout_seconds=python_timeout_seconds,
                                            ro_binds=_interpreter_binds())
        return state["sandbox"]

    @tool
    def run_python(code: str) -> str:
        """Run a Python 3 program in an isolated sandbox: no network, the work dir is the current
        directory and the only writable place. Print what you need to see.

        Args:
            code: The complete program to run.
        """
        result = get_sandbox().run([sys.executable, "-"], stdin=code)
        return format_sandbox_result(result)

    def get_client() -> httpx.Client:
        if state["client"] is None:
            state["client"] = httpx.Client(timeout=web.timeout_seconds if web else 20.0)
        return state["client"]

    def get_visit_client() -> httpx.Client:
        """Page URLs come from the model: this client refuses internal addresses (see netguard)."""
        if state["visit_client"] is None:
            assert web is not None
            state["visit_client"] = visit_client(web)
        return state["visit_client"]

    @tool(read_only=True)
    def web_search(query: str) -> str:
        """Search the web and return numbered results with title, URL and snippet.

        Args:
            query: What to search for, as you would type it into a search engine.
        """
        if web is None or web.search_problem():
            return search_web(web, query, None)  # the unavailability message; no request is made
        return search_web(web, query, get_client())

    @tool(read_only=True)
    def visit_page(url: str, offset: int = 0) -> str:
        """Fetch a web page (or online document) and return its readable text.

        Args:
            url: An http:// or https:// address.
            offset: Character offset to start from, to continue a truncated page.
        """
        if web is None:
            return VISIT_UNAVAILABLE
        try:
            page = fetch_page(web, url, get_visit_client())
        except WebRefused as exc:
            return f"refused: {exc}"
        kind = page.content_type
        if kind in ("text/html", "application/xhtml+xml") or (not kind and page.body.lstrip()[:1] == b"<"):
            text = html_to_text(page.text())
        elif kind.startswith("text/") or kind in _TEXT_TYPES:
            text = page.text()
        else:
            saved = _save_download(root, page.url, kind, page.body)
            try:
                text = f"[saved as {relative(saved)}]\n" + read_attachment(saved, max_chars=10**9)
            except UnsupportedFileType:
                return f"{page.url}: {kind or 'unknown type'} content saved as {relative(saved)} ({len(page.body)} bytes)"
        return truncate(f"URL: {page.url}\n\n{text}", max_chars, offset=max(0, offset))

    return [read_file, list_files, extract_zip, run_python, web_search, visit_page]


def _save_download(root: Path, url: str, content_type: str, body: bytes) -> Path:
    """Store a downloaded document under `<work dir>/downloads/` with a safe name and a fitting suffix.

    `downloads` must be a real folder (a link there, say to a folder outside, is refused) and the file is
    created new through that folder's descriptor, never through an existing file or link.
    """
    name = Path(unquote(urlparse(url).path)).name or "download"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:100].lstrip(".") or "download"
    if not Path(name).suffix:
        name += mimetypes.guess_extension(content_type) or ".bin"
    folder = root / "downloads"
    try:
        folder.mkdir()
    except FileExistsError:
        pass
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise PermissionError(f"cannot save {url}: 'downloads' in the work dir is a link or not a folder "
                              f"({exc.strerror}); downloads are saved only inside the work dir") from None
    try:
        candidate, counter = name, 0
        while True:
            try:
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
                break
            except FileExistsError:  # a file, or a link (never followed), has that name: take the next one
                counter += 1
                candidate = f"{Path(name).stem}_{counter}{Path(name).suffix}"
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
    finally:
        os.close(dir_fd)
    return folder / candidate
