"""Secrets of tracking URIs kept out of everything owl-eval shows or writes: ``postgresql://user:***@host/db``.

A URI's password is found the way SQLAlchemy's ``make_url`` finds it (``scheme://user:password@host:port/db?query``,
``#``, ``/`` and ``?`` allowed in the password), with one difference that only ever hides more: the user part ends
at the *last* ``@`` before the query, so a password with an unescaped ``@`` (which SQLAlchemy would split, sending
the rest to the host) is hidden whole. Query values whose key names a secret (``password``, ``sslpassword``,
``token``, ...: :data:`SECRET_KEY`) are hidden too; file names (``passfile``, ``sslkey``, ``sslcert``) are not
secrets and stay readable. A URI that cannot be read this way but might hold a password (``@`` after a ``:``) is
shown as ``scheme://***@<what follows the last @>``.

Free text (an error line, a traceback, a log file, a file Hydra wrote) is scrubbed by :func:`scrub`: every URI in
it is redacted, and so is every secret of the URIs this process has seen (:func:`remember`: the configured
``tracking.uri``, ``MLFLOW_TRACKING_URI`` and the command line's overrides), wherever it appears, raw or
percent-decoded, even outside a URI (a driver's message quoting it). A secret shorter than
:data:`MIN_BARE_SECRET` characters is hidden only inside URIs: replacing every ``0`` of a log would hide nothing.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote

MASK = "***"
# Query keys whose value is a secret (matched in the lower-cased, percent-decoded key).
SECRET_KEY = re.compile(r"pass(word|wd)|^pwd$|secret|token|api_?key|access_?key|credential|private_?key")
MIN_BARE_SECRET = 4
URI_ENV = "MLFLOW_TRACKING_URI"

_SCHEME = re.compile(r"^([A-Za-z][\w+.-]*)://")
# A URI inside free text: a scheme, ://, then everything up to white space or a quote character.
_URI_IN_TEXT = re.compile(r"\b[A-Za-z][\w+.-]*://[^\s'\"<>`]+")
# A query parameter that starts right after '?' or '&': an '@' after it belongs to the query, not to the user part.
_QUERY_KEY = re.compile(r"[?&][A-Za-z_][\w.-]*=")

_secrets: set[str] = set()  # secrets of URIs seen by this process (raw and decoded)
_uris: set[str] = set()  # those URIs, as given


def redacted(uri: str) -> str:
    """``uri`` with its password (and any secret query value) shown as ``***``, everything else as given; the
    secrets found are remembered for :func:`scrub`."""
    shown, secrets = _split_secrets(uri)
    if secrets:
        _uris.add(uri)
        _secrets.update(s for s in secrets if s)
    return shown


def remember(*uris: str | None) -> None:
    """Remember the secrets of ``uris`` (None and URIs without a secret are ignored), for :func:`scrub`."""
    for uri in uris:
        if uri:
            redacted(str(uri))


def remember_configured(argv: Iterable[str] | None = None) -> None:
    """Remember the secrets of the URIs this command is configured with: ``MLFLOW_TRACKING_URI`` and every
    command-line argument holding ``://`` (an override's value, Hydra's quotes removed)."""
    import sys

    remember(os.environ.get(URI_ENV))
    for arg in sys.argv[1:] if argv is None else argv:
        if "://" not in arg:
            continue
        value = arg.split("=", 1)[1] if "=" in arg.split("://", 1)[0] else arg
        remember(_unquoted(value))


def redacted_override(override: str) -> str:
    """A Hydra override ``key=value`` with the secrets of its value hidden (Hydra's quotes kept)."""
    key, sep, value = override.partition("=")
    if not sep or "://" not in value:
        return override
    inner = _unquoted(value)
    if inner != value:
        quote = value[0]
        return f"{key}={quote}{redacted(inner)}{quote}"
    return f"{key}={redacted(value)}"


def scrub(text: str) -> str:
    """``text`` with every URI in it redacted and every remembered secret replaced by ``***``."""
    if not text:
        return text
    for uri in sorted(_uris, key=len, reverse=True):  # a URI with spaces in its password is replaced whole
        if uri in text:
            text = text.replace(uri, redacted(uri))
    text = _URI_IN_TEXT.sub(lambda m: redacted(m.group(0)), text)
    for secret in sorted(_secrets, key=len, reverse=True):
        if len(secret) >= MIN_BARE_SECRET and secret in text:
            text = text.replace(secret, MASK)
    return text


def _unquoted(value: str) -> str:
    """``value`` without one pair of Hydra quotes around it (``"..."`` or ``'...'``)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _split_secrets(uri: str) -> tuple[str, list[str]]:
    """(``uri`` as shown, the secrets it holds: raw and percent-decoded)."""
    match = _SCHEME.match(uri)
    if match is None:
        return _unparsed(uri)
    head, rest = match.group(0), uri[match.end() :]
    secrets: list[str] = []
    at = _user_part_end(rest)
    if at is not None:
        user, colon, password = rest[:at].partition(":")
        if colon and "/" not in user:
            # An unescaped '@' makes SQLAlchemy send what follows it to the host, which a driver's message may quote.
            secrets += [password, unquote(password), *password.split("@")]
            rest = f"{user}:{MASK}{rest[at:]}"
            at = len(user) + 1 + len(MASK)
        elif colon:  # a user part SQLAlchemy cannot read ('/' in the user name): hidden whole
            secrets += [rest[:at], *rest[:at].split("@")]
            rest = f"{MASK}{rest[at:]}"
            at = len(MASK)
    start = 0 if at is None else at
    query_at = rest.find("?", start)
    if query_at >= 0:
        query, found = _redacted_query(rest[query_at + 1 :])
        rest = f"{rest[: query_at + 1]}{query}"
        secrets += found
    return head + rest, [s for s in secrets if s]


def _user_part_end(rest: str) -> int | None:
    """Index of the '@' that ends the user part of ``rest`` (the URI after ``scheme://``), or None: the last '@'
    that is not inside the query; none when ``rest`` starts with '/' (a path: ``sqlite:///a:b@c.db``)."""
    if rest.startswith("/"):
        return None
    candidates = [i for i, c in enumerate(rest) if c == "@"]
    for at in reversed(candidates):
        previous = rest.rfind("@", 0, at)
        if not _QUERY_KEY.search(rest, previous + 1, at):
            return at
    return None


def _redacted_query(query: str) -> tuple[str, list[str]]:
    """(``query`` with the value of every secret key as ``***``, the values hidden)."""
    parts, secrets = [], []
    for item in query.split("&"):
        key, sep, value = item.partition("=")
        if sep and SECRET_KEY.search(unquote(key).lower()):
            secrets += [value, unquote(value), unquote(value.replace("+", " "))]
            item = f"{key}={MASK}"
        parts.append(item)
    return "&".join(parts), secrets


def _unparsed(uri: str) -> tuple[str, list[str]]:
    """A string without ``scheme://``: shown as given unless it might hold a password (``x:y@z``), then everything
    before its last '@' is hidden."""
    at = uri.rfind("@")
    if at > 0 and ":" in uri[:at] and not uri.startswith(("/", "file:", "sqlite:")):
        return f"{MASK}{uri[at:]}", [uri[:at]]
    return uri, []


# -- files and logs ----------------------------------------------------------------------------------------------


class ScrubbingFormatter(logging.Formatter):
    """Formats a record with the handler's own formatter, then scrubs the text (message and traceback)."""

    def __init__(self, inner: logging.Formatter | None):
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return scrub(self.inner.format(record))


def scrub_logging(loggers: Iterable[logging.Logger] = ()) -> None:
    """Scrub what is logged: every record's message as it is made (a record factory, which outlives the handlers
    Hydra configures again for each job and launch), and, for the tracebacks formatted later, what every handler of
    the root logger, of any logger with handlers of its own (MLflow's) and of ``loggers`` writes (idempotent)."""
    _scrub_records()
    own = [x for x in logging.Logger.manager.loggerDict.values() if isinstance(x, logging.Logger) and x.handlers]
    for logger in [logging.getLogger(), *own, *loggers]:
        for handler in logger.handlers:
            if not isinstance(handler.formatter, ScrubbingFormatter):
                handler.setFormatter(ScrubbingFormatter(handler.formatter))


def _scrub_records() -> None:
    """Install (once) a log record factory that scrubs each record's message."""
    make = logging.getLogRecordFactory()
    if getattr(make, "owl_eval_scrubs", False):
        return

    def scrubbed(*args, **kwargs) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is logging's to report, at emit time
            return record
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        return record

    scrubbed.owl_eval_scrubs = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(scrubbed)


def scrub_file(path: Path) -> None:
    """Rewrite the text file ``path`` scrubbed, when it holds a secret (replaced atomically; a missing or
    unreadable file is left as it is)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        return
    clean = _scrub_yaml(text) if path.suffix in (".yaml", ".yml") else scrub(text)
    if clean == text:
        return
    temporary = path.with_name(f".{path.name}.{os.getpid()}.scrubbed")
    try:
        with open(temporary, "x", encoding="utf-8") as handle:
            handle.write(clean)
        os.chmod(temporary, path.stat().st_mode & 0o777)
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)


def _scrub_yaml(text: str) -> str:
    """A YAML file (Hydra's ``.hydra/*.yaml``, ``multirun.yaml``) scrubbed value by value, so that a secret written
    in quotes or with YAML escapes is found too; written back in OmegaConf's style (interpolations kept)."""
    from omegaconf import OmegaConf

    plain = scrub(text)
    if not _values_may_hold_secret(text):
        return plain
    try:
        node = OmegaConf.to_container(OmegaConf.create(text), resolve=False)
    except Exception:  # noqa: BLE001 - not YAML OmegaConf reads: the text scrub is what there is
        return plain
    cleaned = scrub_values(node)
    if cleaned == node:
        return plain
    return OmegaConf.to_yaml(OmegaConf.create(cleaned))


# A query key naming a secret (SECRET_KEY's words; spaces and line breaks allowed, as YAML may fold them), anywhere
# in a text: a cheap first look before parsing it.
_SECRET_QUERY_KEY = re.compile(
    r"[?&][^=&]*(pass(word|wd)|pwd|secret|token|api_?key|access_?key|credential|private_?key)[^=&]*=", re.I
)


def _values_may_hold_secret(text: str) -> bool:
    """Whether a YAML value of ``text`` can hold a secret that the text scrub misses (one written in quotes or with
    YAML escapes): only where this process remembers a secret, or where ``text`` has a URI (``://``) and a user part
    (``@``) or a query key naming a secret. YAML writes neither of those characters escaped, nor breaks a line inside
    ``://``, so a file without them is not parsed (Hydra's ``hydra.yaml`` of every job: 5 KB, 25-50 ms to parse)."""
    if _secrets or _uris:
        return True
    if "://" not in text:
        return False
    return "@" in text or _SECRET_QUERY_KEY.search(unquote(text)) is not None


def scrub_values(node):
    """A config tree (dicts, lists, scalars) with every string scrubbed (:func:`scrub`); a string that is a URI, or
    an override ``key=URI``, is first redacted whole (:func:`redacted`), so that a password holding a quote or a
    space, where a URI in free text is taken to end, is hidden too."""
    if isinstance(node, dict):
        return {k: scrub_values(v) for k, v in node.items()}
    if isinstance(node, list):
        return [scrub_values(v) for v in node]
    if not isinstance(node, str):
        return node
    if _SCHEME.match(node):
        node = redacted(node)
    elif "://" in node and "=" in node:
        node = redacted_override(node)
    return scrub(node)
