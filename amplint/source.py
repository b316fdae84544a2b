"""Reading and writing source files without losing a byte.

Files are read as bytes, decoded with the encoding Python itself would use (PEP 263 coding
cookie or UTF-8 BOM), and written back with the same encoding, BOM and line endings,
atomically (temp file in the same directory, then rename), keeping permissions.
"""

from __future__ import annotations

import io
import os
import stat as stat_mod


class SourceError(Exception):
    pass


class Source:
    """A file's bytes, its decoded text and how to encode it back (encoding: as for
    bytes.decode; "utf-8-sig" when a BOM is present)."""

    __slots__ = ("path", "data", "text", "encoding", "mtime_ns", "size")

    def __init__(self, path: str, data: bytes, text: str, encoding: str, mtime_ns: int = 0, size: int = 0):
        self.path = path
        self.data = data
        self.text = text
        self.encoding = encoding
        self.mtime_ns = mtime_ns
        self.size = size

    def _replace(self, **changes) -> "Source":
        values = {k: getattr(self, k) for k in self.__slots__}
        values.update(changes)
        return Source(**values)


def decode(data: bytes) -> tuple[str, str]:
    # the common case without tokenize (whose import is a millisecond of a warm run): no BOM,
    # no coding cookie in the first two lines, valid UTF-8: what detect_encoding then returns
    first = data.find(b"\n")
    second = data.find(b"\n", first + 1) if first >= 0 else -1
    if not data.startswith(b"\xef\xbb\xbf") and b"coding" not in data[: second if second >= 0 else len(data)]:
        try:
            return data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            pass
    import tokenize

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


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where Python splits them: at \\n, \\r\\n and \\r only.
    (str.splitlines also splits at form feeds, \\x1c-\\x1e, \\x85 and \\u2028/9, which Python
    source may hold inside a line; row numbers would then disagree with the parser's.)"""
    return io.StringIO(text, newline="").readlines()


def read_bytes(path: str) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file and its stat; ``SourceError`` for anything else."""
    try:
        # O_NONBLOCK and the S_ISREG check: a FIFO or a device named x.py must not hang the run
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with open(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat_mod.S_ISREG(st.st_mode):
                raise SourceError("Is a directory" if stat_mod.S_ISDIR(st.st_mode) else "Not a regular file")
            return fh.read(), st
    except OSError as exc:
        raise SourceError(exc.strerror or str(exc)) from None


def read_source(path: str) -> Source:
    data, st = read_bytes(path)
    text, encoding = decode(data)
    return Source(path, data, text, encoding, st.st_mtime_ns, st.st_size)


def encode(text: str, encoding: str) -> bytes:
    return text.encode(encoding)


class ChangedOnDisk(Exception):
    pass


class ReadOnly(SourceError):
    """The file's owner cannot write it (mode 0444, or a user without write permission)."""


def atomic_write(src: Source, new_text: str) -> None:
    """Replace ``src.path`` with ``new_text`` unless the file changed since it was read.

    A symlink is kept: its target is rewritten. The new content goes to a hidden
    ``.amplint-*.tmp`` beside the target and is renamed over it, so a crash at any point
    leaves the original intact (a hard kill may leave the temp file behind); mode, owner and
    group are kept. A file with several hard links is rewritten in place (a rename would give
    this name a new inode and leave the other names with the old text). A file that is not
    writable (no write bit for its owner, or no permission for this user) is never rewritten:
    ``ReadOnly``."""
    data = encode(new_text, src.encoding)
    path = os.path.realpath(src.path)  # write through symlinks, never replace the link itself
    directory = os.path.dirname(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise SourceError(exc.strerror or str(exc)) from None
    if not st.st_mode & stat_mod.S_IWUSR or not os.access(path, os.W_OK):
        raise ReadOnly("read-only, not fixed")
    if st.st_nlink > 1:
        _write_in_place(path, src, data)
        return
    import tempfile  # only a fix writes: `amplint check` does not load it

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
        # compare as late as possible: a change made while we fixed is never overwritten
        _unchanged(path, src)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _unchanged(path: str, src: Source) -> None:
    try:
        with open(path, "rb") as fh:
            current = fh.read()
    except OSError as exc:
        raise SourceError(exc.strerror or str(exc)) from None
    if current != src.data:
        raise ChangedOnDisk(src.path)


def _write_in_place(path: str, src: Source, data: bytes) -> None:
    """Rewrite a hard-linked file through its inode (every name sees the fix). Not atomic
    against a crash mid-write, which is why it is only used where a rename would be wrong."""
    try:
        with open(path, "r+b") as fh:
            current = fh.read()
            if current != src.data:
                raise ChangedOnDisk(src.path)
            fh.seek(0)
            fh.write(data)
            fh.truncate()
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise SourceError(exc.strerror or str(exc)) from None
