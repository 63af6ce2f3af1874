"""Agent side (the scoring side only reads the settings, `WebConfig`, to hand them over): web search and page visits
for the GAIA toolset, behind an explicit provider setting.

Nothing here reaches the network unless the user configured it (`QITOS_WEB_SEARCH` plus a
key, or a `WebConfig` passed in code); unconfigured tools answer with a message saying
what to set, so offline runs stay reproducible and the model learns the tool is off.

Page visits go through `qitos.sandbox.netguard`: the URL comes from the model (and so, maybe,
from a prompt injection), so loopback, private, link-local (cloud metadata), multicast and
reserved addresses are refused after DNS resolution and on every redirect hop, unless
`allow_private_addresses` (`QITOS_WEB_ALLOW_PRIVATE=1`) says otherwise. IP literals in any
spelling (`0177.0.0.1`, `0x7f.1`, `2130706433`) are refused before any request, and a URL that
does not parse is refused naming it.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from typing import Any, Literal

import httpx
from pydantic import BaseModel, Field, SecretStr

__all__ = ["WebConfig", "WebError", "WebRefused", "FetchedPage", "visit_client", "SEARCH_PROVIDERS",
           "SEARCH_UNAVAILABLE", "VISIT_UNAVAILABLE",
           "search_web", "fetch_page", "html_to_text"]

SearchProvider = Literal["tavily", "serper", "brave", "searxng"]
SEARCH_PROVIDERS: tuple[str, ...] = ("tavily", "serper", "brave", "searxng")
_KEY_VARIABLES = {"tavily": "TAVILY_API_KEY", "serper": "SERPER_API_KEY", "brave": "BRAVE_API_KEY"}
SEARCH_UNAVAILABLE = (
    "web search is unavailable: set QITOS_WEB_SEARCH=tavily|serper|brave with its key "
    "(QITOS_WEB_SEARCH_KEY or TAVILY_API_KEY / SERPER_API_KEY / BRAVE_API_KEY), "
    "or QITOS_WEB_SEARCH=searxng with QITOS_SEARXNG_URL"
)
VISIT_UNAVAILABLE = "page visits are unavailable: web access is off for this run (set QITOS_WEB_SEARCH or pass a WebConfig)"


class WebError(RuntimeError):
    """A configured web call failed (HTTP error, timeout, unreadable response)."""


class WebRefused(WebError):
    """The page is on an address agent tools may not reach (loopback, private, metadata, ...)."""


class WebConfig(BaseModel):
    """How the agent may use the web. `search_provider=None` still allows page visits."""

    search_provider: SearchProvider | None = None
    api_key: SecretStr | None = None
    searxng_url: str | None = None
    timeout_seconds: float = 20.0
    max_results: int = Field(default=8, ge=1, le=20)
    max_page_bytes: int = Field(default=5_000_000, ge=1_000)
    user_agent: str = "QitOS-GAIA/0.1 (+research agent benchmark)"
    allow_private_addresses: bool = False  # let visit_page reach loopback/private/link-local hosts

    def model_post_init(self, _context: Any) -> None:
        """The search key is a secret whatever variable it came from: never written to a trace."""
        if self.api_key is not None:
            from qitos.trace.redact import register_secret

            register_secret(self.api_key.get_secret_value())

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "WebConfig | None":
        """Build from `QITOS_WEB_SEARCH` and key variables; None when web access is not configured."""
        env = os.environ if environ is None else environ
        provider = env.get("QITOS_WEB_SEARCH", "").strip().lower()
        if not provider or provider in ("0", "off", "none"):
            return None
        if provider not in SEARCH_PROVIDERS:
            known = ", ".join(SEARCH_PROVIDERS)
            raise ValueError(f"QITOS_WEB_SEARCH={provider!r} is not a known provider; choose one of {known}")
        key = env.get("QITOS_WEB_SEARCH_KEY") or env.get(_KEY_VARIABLES.get(provider, ""), "")
        allow_private = env.get("QITOS_WEB_ALLOW_PRIVATE", "").strip().lower()
        if allow_private not in ("", "0", "1", "true", "false", "yes", "no"):
            raise ValueError(f"QITOS_WEB_ALLOW_PRIVATE={allow_private!r} must be 1 or 0")
        return cls(
            allow_private_addresses=allow_private in ("1", "true", "yes"),
            search_provider=provider,  # type: ignore[arg-type]
            api_key=SecretStr(key) if key else None,
            searxng_url=env.get("QITOS_SEARXNG_URL") or None,
        )

    def search_problem(self) -> str | None:
        """Why search cannot run with this configuration, or None when it can."""
        if self.search_provider is None:
            return SEARCH_UNAVAILABLE
        if self.search_provider == "searxng":
            return None if self.searxng_url else "web search is unavailable: set QITOS_SEARXNG_URL for searxng"
        if self.api_key is None or not self.api_key.get_secret_value():
            return f"web search is unavailable: set QITOS_WEB_SEARCH_KEY or {_KEY_VARIABLES[self.search_provider]}"
        return None


def _request(client: httpx.Client, method: str, url: str, **kwargs: Any) -> Any:
    try:
        response = client.request(method, url, **kwargs)
        response.raise_for_status()
        return response.json()
    except httpx.HTTPStatusError as exc:
        raise WebError(f"search request failed with HTTP {exc.response.status_code}") from exc
    except (httpx.HTTPError, ValueError) as exc:
        raise WebError(f"search request failed: {exc}") from exc


def _search_results(config: WebConfig, query: str, client: httpx.Client) -> list[dict[str, str]]:
    key = config.api_key.get_secret_value() if config.api_key else ""
    n = config.max_results
    if config.search_provider == "tavily":
        data = _request(client, "POST", "https://api.tavily.com/search", json={"query": query, "max_results": n},
                        headers={"Authorization": f"Bearer {key}"})
        return [{"title": r.get("title", ""), "url": r.get("url", ""), "snippet": r.get("content", "")}
                for r in data.get("results", [])]
    if config.search_provider == "serper":
        data = _request(client, "POST", "https://google.serper.dev/search", json={"q": query, "num": n},
                        headers={"X-API-KEY": key})
        return [{"title": r.get("title", ""), "url": r.get("link", ""), "snippet": r.get("snippet", "")}
                for r in data.get("organic", [])]
    if config.search_provider == "brave":
        data = _request(client, "GET", "https://api.search.brave.com/res/v1/web/search", params={"q": query, "count": n},
                        headers={"X-Subscription-Token": key, "Accept": "application/json"})
        return [{"title": r.get("title", ""), "url": r.get("url", ""), "snippet": r.get("description", "")}
                for r in data.get("web", {}).get("results", [])]
    base = (config.searxng_url or "").rstrip("/")
    data = _request(client, "GET", f"{base}/search", params={"q": query, "format": "json"})
    return [{"title": r.get("title", ""), "url": r.get("url", ""), "snippet": r.get("content", "")}
            for r in data.get("results", [])]


def search_web(config: WebConfig | None, query: str, client: httpx.Client | None) -> str:
    """Numbered results (title, url, snippet), or the reason search is unavailable."""
    problem = SEARCH_UNAVAILABLE if config is None else config.search_problem()
    if problem:
        return problem
    assert config is not None
    if client is None:
        raise WebError("search needs an HTTP client")
    results = _search_results(config, query, client)[: config.max_results]
    if not results:
        return f"no results for {query!r}"
    lines = []
    for number, item in enumerate(results, start=1):
        lines.append(f"{number}. {item['title']}\n   {item['url']}\n   {' '.join(item['snippet'].split())}")
    return "\n".join(lines)


_BLOCK_TAGS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "table",
               "ul", "ol", "header", "footer", "pre", "blockquote", "dt", "dd", "hr"}
_SKIP_TAGS = {"script", "style", "noscript", "template", "svg", "head"}


class _TextExtractor(HTMLParser):
    """Visible text of an HTML page: blocks on their own lines, table cells space-separated, links as [text](url)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip_depth = 0
        self.title = ""
        self._in_title = False
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _SKIP_TAGS:
            self.skip_depth += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append("\t")
        elif tag == "a":
            self._href = dict(attrs).get("href")
            self.parts.append("[")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _SKIP_TAGS:
            self.skip_depth = max(0, self.skip_depth - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")
        elif tag == "a":
            self.parts.append(f"]({self._href})" if self._href else "]")
            self._href = None

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if not self.skip_depth:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Readable text of an HTML document (title first, whitespace collapsed, blank lines squeezed)."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in "".join(parser.parts).split("\n")]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    body = re.sub(r"\[\s*\]\([^)]*\)", "", body)  # links without text (icons)
    title = " ".join(parser.title.split())
    return f"# {title}\n\n{body}" if title else body


class FetchedPage(BaseModel):
    """A downloaded page: final URL after redirects, bare content type, charset, and the (capped) body."""

    url: str
    content_type: str
    charset: str | None = None
    body: bytes

    def text(self) -> str:
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:  # unknown charset name
            return self.body.decode("utf-8", errors="replace")


def visit_client(config: WebConfig) -> httpx.Client:
    """The client page visits use: internal addresses refused unless the config allows them."""
    from qitos.sandbox.netguard import guarded_client

    return guarded_client(allow_private=config.allow_private_addresses, timeout=config.timeout_seconds)


def fetch_page(config: WebConfig, url: str, client: httpx.Client) -> FetchedPage:
    """GET `url` (http/https only, size-capped at `config.max_page_bytes`); use `visit_client(config)`.

    The URL comes from the model: one that does not parse, or whose host is an internal IP literal in any
    spelling (`0177.0.0.1`), is refused here, naming the URL, before any request.
    """
    from qitos.sandbox.netguard import AddressRefused, check_url

    if not re.match(r"^https?://", url, re.IGNORECASE):
        raise WebError(f"only http:// and https:// URLs can be visited, got {url!r}")
    try:
        why = check_url(url)
    except ValueError as exc:
        raise WebRefused(f"{url}: not a valid URL ({exc})") from None
    if why and not config.allow_private_addresses:
        raise WebRefused(f"{url}: {why}; agent tools may only reach public addresses")
    try:
        with client.stream("GET", url, follow_redirects=True, timeout=config.timeout_seconds,
                           headers={"User-Agent": config.user_agent}) as response:
            if response.status_code >= 400:
                raise WebError(f"{url}: HTTP {response.status_code}")
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size > config.max_page_bytes:
                    break
            header = response.headers.get("content-type", "")
            charset = re.search(r"charset=[\"']?([\w.:-]+)", header, re.IGNORECASE)
            return FetchedPage(
                url=str(response.url),
                content_type=header.split(";")[0].strip().lower(),
                charset=charset.group(1) if charset else None,
                body=b"".join(chunks)[: config.max_page_bytes],
            )
    except AddressRefused as exc:
        raise WebRefused(f"{url}: {exc}") from exc
    except httpx.InvalidURL as exc:  # not an HTTPError: e.g. a host httpx will not parse
        raise WebRefused(f"{url}: not a valid URL ({exc})") from None
    except httpx.HTTPError as exc:
        raise WebError(f"{url}: request failed: {exc}") from exc
