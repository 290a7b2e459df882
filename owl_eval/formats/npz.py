"""Arrays of an ``.npz`` read without pickles, every member's CRC-32 checked, stored members memory-mapped.

``np.load(path, mmap_mode="r")`` reads every member of an .npz fully into memory, so uncompressed
(stored) members are mapped here directly from the zip file, and chunks of scenes are read from the
maps. A map bypasses zipfile's CRC check, so a flipped byte inside a member would be scored as
data (one flipped byte can turn an ADE of 0.84 into 47.96): :func:`verify_npz` first reads every member once through
zipfile, which checks its CRC-32, and a bad member is one error naming the file and the member. The
check is a sequential read of the file (measured: 0.07 s for a 210 MB file in the page cache).

Every malformed member (bad CRC, truncated, not a ``.npy``, a header that does not match the member's
size, Python objects) is a :class:`~owl_eval.errors.MetricInputError` naming the file and the member.

A compressed member is inflated into memory, so what its header declares (shape times item size) is checked
before a byte is inflated (:func:`check_inflated_size`): at most :data:`MAX_INFLATED_BYTES` (2 GiB) and at most
the memory available now. A 3 MB zip bomb declaring ``(10**6, 10**6)`` float64 is one error naming the file,
the member, its shape and the bytes it would need, instead of a MemoryError. Stored (uncompressed) members are
memory-mapped and hold every byte they declare, so they cost no more than their size. The same check guards
data sets (:mod:`owl_eval.datasets.arrays`).
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

from owl_eval.errors import MetricInputError
from owl_eval.json_input import parse_json

READ_BLOCK = 1 << 22  # bytes per read of the CRC check
# The most a compressed member may inflate to; larger arrays are saved uncompressed (np.savez), and mapped.
MAX_INFLATED_BYTES = 1 << 31
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    struct.error,
)


def _open_zip(path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except _ZIP_ERRORS as exc:
        raise MetricInputError(f"{path}: not a readable .npz (zip) file ({exc})") from None


def verify_npz(path, *, stored_only: bool = False) -> None:
    """Read every member of the zip once; zipfile checks each member's CRC-32 at its end.

    A corrupted, truncated, encrypted or undecodable member is one error naming ``path`` and the member.
    ``stored_only``: check the uncompressed members only (a deflated member is checked when it is read in
    full, as :func:`npz_arrays` does, so checking it here would decompress it twice).
    """
    with _open_zip(path) as zf:
        for info in zf.infolist():
            if stored_only and info.compress_type != zipfile.ZIP_STORED:
                continue
            _raise_if_corrupted(path, zf, info)


def _raise_if_corrupted(path, zf, info):
    """The corrupted-member error when ``info`` fails its CRC-32 (read to its end), else nothing."""
    try:
        with zf.open(info) as member:
            while member.read(READ_BLOCK):
                pass
    except _ZIP_ERRORS as exc:
        raise _corrupted(path, info, exc) from None


def _corrupted(path, info, exc):
    return MetricInputError(
        f"{path}: member {info.filename!r} is corrupted ({exc}); the file was damaged "
        "after it was written (copy or download it again)"
    )


def _header(fh, path, member: str):
    """``(shape, fortran_order, dtype)`` of the .npy header at the stream's position."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        raise MetricInputError(f"{path}: member {member!r} is a .npy of format version {version}, expected 1.0 or 2.0")
    if dtype.hasobject:
        raise MetricInputError(
            f"{path}: member {member!r} holds Python objects (dtype {dtype}); refusing to unpickle: "
            "save numeric arrays (float, int or bool)"
        )
    return shape, fortran, dtype


def _size_error(path, member, shape, dtype, need, have):
    return MetricInputError(
        f"{path}: member {member!r} has a header for shape {shape} of {dtype} ({need} bytes) "
        f"but holds {have} bytes of data"
    )


class MemberTooLarge(MetricInputError):
    """A compressed member that declares more bytes than may be inflated (see :func:`check_inflated_size`)."""


def available_memory() -> int | None:
    """Bytes of memory available now (Linux ``MemAvailable``), or None where that cannot be read."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB"


def check_inflated_size(path, member: str, shape, dtype, *, limit: int = MAX_INFLATED_BYTES) -> int:
    """The bytes a compressed member declares it holds (``shape`` times ``dtype``'s item size, exact), or one
    :class:`MemberTooLarge` naming the file, the member, its shape and those bytes when they exceed ``limit`` or
    the memory available now: checked before anything is inflated, so a zip bomb costs nothing."""
    need = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize  # Python ints: a forged shape cannot overflow
    where = f"{path}: member {member!r} declares shape {tuple(shape)} of {np.dtype(dtype)} ({need} bytes, {_gib(need)})"
    if need > limit:
        raise MemberTooLarge(
            f"{where} once inflated, more than the {limit} bytes ({_gib(limit)}) a compressed member may hold; "
            "a small file declaring this is damaged or hostile, and a real array this large is saved uncompressed "
            "(np.savez), which is memory-mapped instead of read into memory"
        )
    free = available_memory()
    if free is not None and need > free:
        raise MemberTooLarge(
            f"{where} once inflated, more than the memory available now ({free} bytes, {_gib(free)}); "
            "save it uncompressed (np.savez: memory-mapped) or free memory"
        )
    return need


def stored_array(path, fh, info, name):
    """A stored (uncompressed) member memory-mapped from the zip file (its CRC is :func:`verify_npz`'s to check)."""
    fh.seek(info.header_offset)
    head = fh.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise MetricInputError(f"{path}: member {info.filename!r} has a bad local header")
    n_name, n_extra = struct.unpack("<HH", head[26:30])
    start = info.header_offset + 30 + n_name + n_extra
    fh.seek(start)
    shape, fortran, dtype = _header(fh, path, info.filename)
    offset = fh.tell()
    need = int(np.prod(shape, dtype=object)) * dtype.itemsize  # Python ints: a forged shape cannot overflow
    have = info.file_size - (offset - start)
    if need != have:
        raise _size_error(path, info.filename, shape, dtype, need, have)
    if need == 0:
        return np.zeros(shape, dtype=dtype, order="F" if fortran else "C")
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


def compressed_array(path, zf, info):
    """A deflated member read into memory; its CRC-32 is checked on the way."""
    try:
        with zf.open(info) as member:
            shape, fortran, dtype = _header(member, path, info.filename)
            need = check_inflated_size(path, info.filename, shape, dtype)
            if info.file_size > MAX_INFLATED_BYTES:  # the zip's own size disagrees with a small header: not read
                raise MemberTooLarge(
                    f"{path}: member {info.filename!r} declares {info.file_size} bytes uncompressed, more than "
                    f"{MAX_INFLATED_BYTES}; expected a smaller compressed member (save large arrays uncompressed "
                    "with np.savez: they are mapped)"
                )
            have = info.file_size - member.tell()
            if need != have:
                raise _size_error(path, info.filename, shape, dtype, need, have)
            data = member.read(need)
            member.read(1)  # reaches the end of the stream, where zipfile compares the CRC-32
    except MemberTooLarge:
        raise  # never inflated: looking for damage would inflate it to its end
    except (zipfile.BadZipFile, zlib.error) as exc:  # a bad CRC-32, a damaged deflate stream
        raise _corrupted(path, info, exc) from None
    except (MetricInputError, *_ZIP_ERRORS) as exc:
        # damaged deflated bytes can decode into a garbage header before the CRC is reached: name the damage
        _raise_if_corrupted(path, zf, info)
        raise exc from None
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")  # read-only, as the maps


def distinct_members(path, infos: list[zipfile.ZipInfo]) -> None:
    """A zip can hold two entries of one name, and numpy (as zipfile) silently keeps the last: two arrays of one
    name are ambiguous, one error naming the member and both entries' places in the zip (1-based)."""
    first: dict[str, int] = {}
    for number, info in enumerate(infos, 1):
        if info.filename in first:
            raise MetricInputError(
                f"{path}: member {info.filename!r} appears twice in the zip (entries {first[info.filename]} and "
                f"{number}); expected distinct array names"
            )
        first[info.filename] = number


def npz_arrays(path, *, verify: bool = True) -> dict:
    """The arrays of an .npz by name: memory-mapped for stored members, loaded for compressed ones
    (``np.savez_compressed``, as owl-eval's records; a map of deflated bytes is impossible).

    ``verify`` (default) checks every member's CRC: stored members first (:func:`verify_npz`), since a
    map bypasses zipfile; deflated members while they are read. Members whose name does not end in
    ``.npy`` are not arrays and are left out; two members of one name are an error (:func:`distinct_members`).
    No pickles are ever loaded.
    """
    path = Path(path)
    if verify:
        verify_npz(path, stored_only=True)
    out = {}
    with _open_zip(path) as zf, open(path, "rb") as fh:
        distinct_members(path, zf.infolist())
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                continue
            name = info.filename[:-4]
            try:
                if info.compress_type == zipfile.ZIP_STORED:
                    out[name] = stored_array(path, fh, info, name)
                else:
                    out[name] = compressed_array(path, zf, info)
            except MetricInputError:
                raise
            except _ZIP_ERRORS as exc:
                raise MetricInputError(
                    f"{path}: member {info.filename!r} is not a readable .npy array ({exc})"
                ) from None
    return out


KIND_NAMES = {"b": "booleans", "i": "integers", "u": "integers", "f": "floats", "U": "strings", "S": "strings"}


def member(arrays, name: str, path, *, kinds: str = "biuf", ndim: int | None = None) -> np.ndarray:
    """``arrays[name]`` read into memory (a writable copy), checked: present, of a dtype kind in ``kinds``
    (``"biuf"`` numbers, ``"US"`` strings) and with ``ndim`` axes; else one error naming file and member."""
    if name not in arrays:
        raise MetricInputError(f"{path}: array {name!r} not found; the file has {sorted(arrays)[:30]}")
    arr = np.array(arrays[name])
    if arr.dtype.kind not in kinds:
        wanted = " or ".join(dict.fromkeys(KIND_NAMES[k] for k in kinds))
        raise MetricInputError(f"{path}: array {name!r} has dtype {arr.dtype}, expected {wanted}")
    if ndim is not None and arr.ndim != ndim:
        raise MetricInputError(f"{path}: array {name!r} has {arr.ndim} axes {arr.shape}, expected {ndim}")
    return arr


def json_member(arrays, name: str, path) -> dict:
    """The JSON object stored as the 0-d string member ``name`` (a record's ``meta_json``)."""
    text = member(arrays, name, path, kinds="U", ndim=0).item()
    return parse_json(text, where=f"{path}: array {name!r}", error=MetricInputError, expect_object="record settings")
