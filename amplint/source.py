"""Reading and writing source files without losing a byte.

Files are read as bytes, decoded with the encoding Python itself would use (PEP 263 coding
cookie or UTF-8 BOM), and written back with the same encoding, BOM and line endings,
atomically (temp file in the same directory, then rename), keeping permissions.
"""

from __future__ import annotations

import io
import os
import tempfile
import tokenize
from dataclasses import dataclass


class SourceError(Exception):
    pass


@dataclass
class Source:
    path: str
    data: bytes
    text: str
    encoding: str  # as for bytes.decode; "utf-8-sig" when a BOM is present
    mtime_ns: int = 0
    size: int = 0


def decode(data: bytes) -> tuple[str, str]:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise SourceError(str(exc)) from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError(f"cannot decode as {encoding}: {exc}") from None
    if encoding == "utf-8-sig" and text.startswith("\ufeff"):
        text = text[1:]
    return text, encoding


def read_source(path: str) -> Source:
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read()
    except OSError as exc:
        raise SourceError(exc.strerror or str(exc)) from None
    text, encoding = decode(data)
    return Source(path, data, text, encoding, st.st_mtime_ns, st.st_size)


def encode(text: str, encoding: str) -> bytes:
    return text.encode(encoding)


class ChangedOnDisk(Exception):
    pass


def atomic_write(src: Source, new_text: str) -> None:
    """Replace ``src.path`` with ``new_text`` unless the file changed since it was read."""
    data = encode(new_text, src.encoding)
    path = src.path
    try:
        with open(path, "rb") as fh:
            current = fh.read()
    except OSError as exc:
        raise SourceError(exc.strerror or str(exc)) from None
    if current != src.data:
        raise ChangedOnDisk(path)
    directory = os.path.dirname(os.path.abspath(path))
    st = os.stat(path)
    fd, tmp = tempfile.mkstemp(prefix=".amplint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, st.st_mode & 0o7777)
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except OSError:
            pass
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
