"""Names and files taken from user data, handled without ever leaving the folder they came from.

A test id, session, task or worker name read from a user's file becomes a file name, a metric key or an
artifact name: :func:`check_name` accepts only one safe character set (letters, digits, ``_ - .``, no
separators, no ``..``). User folders are listed and read without following symbolic links: a link (or a
link loop) inside a folder is one clear error, never followed, never copied (a link to ``/etc/hostname``
would otherwise land in MLflow's artifacts, and a loop fills the disk).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from owl_eval.errors import UnsafePathError

SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}$")
SAFE_NAME_RULE = "1-200 characters from A-Z a-z 0-9 _ - ., not starting with '.' or '-', no '..'"


def check_name(name: object, *, what: str, where: str) -> str:
    """``name`` if it is a safe single path component, else :class:`UnsafePathError` naming ``what``
    (``task name``) and ``where`` (the file and row it came from)."""
    text = str(name)
    if not SAFE_NAME.match(text) or ".." in text:
        raise UnsafePathError(f"{where}: {what} {text[:80]!r} is not a safe name ({SAFE_NAME_RULE})")
    return text


def _reject_link(path: Path, what: str) -> None:
    target = os.readlink(path) if path.is_symlink() else "?"
    raise UnsafePathError(
        f"{path}: {what} is a symbolic link (to {target!r}); links inside a results folder are "
        "not followed: copy the real file there instead"
    )


def list_tree(root: Path | str, *, what: str = "results folder") -> tuple[dict[str, Path], list[str]]:
    """``(files, folders)`` under ``root``: every regular file by its path relative to ``root`` (``a/b.csv``)
    and every folder's relative path, walking without following links. ``root`` itself is resolved (the
    user named it); a link, FIFO or device below it is an :class:`UnsafePathError`."""
    base = Path(root).expanduser()
    if not base.exists():
        if base.is_symlink():
            _reject_link(base, what)
        raise UnsafePathError(f"{base}: no such directory ({what})")
    base = base.resolve()
    if not base.is_dir():
        raise UnsafePathError(f"{base}: not a directory ({what})")
    files: dict[str, Path] = {}
    folders: list[str] = []
    pending = [("", str(base))]
    while pending:
        prefix, folder = pending.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise UnsafePathError(f"{folder}: cannot be read ({exc.strerror})") from None
        for entry in entries:
            rel = prefix + entry.name
            if entry.is_symlink():
                _reject_link(Path(entry.path), f"an entry of the {what}")
            if entry.is_dir(follow_symlinks=False):
                folders.append(rel)
                pending.append((rel + "/", entry.path))
            elif entry.is_file(follow_symlinks=False):
                files[rel] = Path(entry.path)
            else:
                raise UnsafePathError(f"{entry.path}: not a regular file ({what})")
    return dict(sorted(files.items())), sorted(folders)


def list_files(root: Path | str, *, what: str = "results folder") -> dict[str, Path]:
    """Every regular file under ``root`` by its relative path (see :func:`list_tree`)."""
    return list_tree(root, what=what)[0]


def regular_file(path: Path | str, *, what: str = "file") -> Path:
    """``path`` if it is a regular file reached without a link in its last component, else one error."""
    p = Path(path).expanduser()
    try:
        mode = os.lstat(p).st_mode
    except FileNotFoundError:
        raise UnsafePathError(f"{p}: {what} not found") from None
    except OSError as exc:
        raise UnsafePathError(f"{p}: {what} cannot be read ({exc.strerror})") from None
    if stat.S_ISLNK(mode):
        _reject_link(p, what)
    if not stat.S_ISREG(mode):
        raise UnsafePathError(f"{p}: {what} is not a regular file")
    return p


def read_bytes(path: Path | str, *, what: str = "file") -> bytes:
    """The bytes of a regular file, opened with ``O_NOFOLLOW`` (a link, also one swapped in after a listing,
    is refused) and ``O_NONBLOCK`` (a FIFO cannot hang the read); checked as a regular file once open."""
    p = os.path.expanduser(os.fspath(path))
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        regular_file(p, what=what)  # a missing file or a link: its own message
        raise UnsafePathError(f"{p}: {what} cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(f"{p}: {what} is not a regular file")
        chunks = []
        while chunk := os.read(fd, max(info.st_size + 1, 1 << 16)):  # one read, unless the file grew
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: Path | str, *, what: str = "file") -> str:
    """UTF-8 text of a regular file (see :func:`read_bytes`); other encodings are one error naming the byte."""
    return decode_utf8(path, read_bytes(path, what=what))


def decode_utf8(path: Path | str, data: bytes, *, error: type[Exception] = UnsafePathError) -> str:
    """``data`` as UTF-8 text; otherwise one ``error`` naming the file, the line and the offending byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{path}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save the file as UTF-8"
        ) from None


def copy_files(files: Iterable[Path], src_root: Path | str, dst_root: Path | str) -> list[Path]:
    """Copy exactly ``files`` (regular files under ``src_root``, already parsed) to the same relative
    places under ``dst_root``; nothing else of the folder is copied, no link is followed."""
    src, dst = Path(src_root).resolve(), Path(dst_root)
    written = []
    for file in files:
        path = regular_file(file)
        rel = path.resolve().relative_to(src)
        for part in rel.parts:
            check_name(part, what="file name", where=str(path))
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target, follow_symlinks=False)
        written.append(target)
    return written
