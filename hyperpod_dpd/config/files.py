"""Reading configuration files and directories: strict UTF-8, and one line for whatever is not a readable file.

Everything the operating system can answer instead of a file (nothing there, a dangling or looping symbolic link, a
directory named ``dev.yaml``, a FIFO that would block the reader forever, a file the user may not read, a file larger
than any configuration) becomes a :class:`ConfigError` naming the path and what is there, never an ``OSError`` trace.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from pathlib import Path

from hyperpod_dpd.config.yaml_safe import MAX_FILE_BYTES
from hyperpod_dpd.errors import ConfigError, Verbatim

# Checked longest first: a UTF-32 LE mark starts with the UTF-16 LE one.
_FOREIGN_MARKS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                  (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


def display_path(path: Path) -> str:
    """A path as error messages show it: relative to the current directory when it is below it."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # Python 3.11 raises RuntimeError("Symlink loop from ...") on a loop
        resolved = Path(os.path.abspath(path))
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):
        return str(path)


def present(path: Path) -> bool:
    """Whether anything is at ``path``, a broken or looping symbolic link included (reading it says what it is)."""
    return os.path.lexists(path)


def _os_problem(path: Path, error: OSError, what: str) -> str:
    """Why the operating system refused to open or look at ``path``."""
    if error.errno == errno.ELOOP:
        return "is a symbolic link loop (too many levels of symbolic links)"
    if isinstance(error, FileNotFoundError):
        if os.path.islink(path):
            return f"is a symbolic link to {os.readlink(path)!r}, which does not exist"
        return f"no such {what}"
    if isinstance(error, NotADirectoryError):
        return f"no such {what} (a part of the path is a file, not a directory)"
    if isinstance(error, PermissionError):
        return "cannot be read: permission denied"
    return f"cannot be read: {error.strerror or error}"


def read_text(path: Path) -> str:
    """The file at ``path``, decoded strictly as UTF-8 (a UTF-8 byte-order mark is allowed, YAML skips it)."""
    source = display_path(path)

    def refuse(message: str) -> ConfigError:
        return ConfigError.single(source, "<file>", path.name, message)

    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise refuse("is a directory, not a configuration file")
        if not stat.S_ISREG(info.st_mode):
            raise refuse("is not a regular file (a FIFO, socket or device); a configuration is a YAML file")
        if info.st_size > MAX_FILE_BYTES:
            raise refuse(f"is {info.st_size:,} bytes; a configuration file holds at most {MAX_FILE_BYTES:,}")
        # O_NONBLOCK: should the file have become a FIFO since the stat, opening it still returns at once.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(descriptor, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise refuse(_os_problem(path, exc, "file")) from None
    if len(data) > MAX_FILE_BYTES:
        raise refuse(f"is larger than {MAX_FILE_BYTES:,} bytes, the most a configuration file holds")
    return decode(data, source)


def decode(data: bytes, source: str) -> str:
    """``data`` as strict UTF-8, or one line naming the encoding problem, its byte offset and line."""
    for mark, encoding in _FOREIGN_MARKS:
        if data.startswith(mark):
            raise _undecodable(source, 1, 0, data[:len(mark)],
                               f"the file is {encoding} (it starts with a {encoding} byte-order mark)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _undecodable(source, line, exc.start, data[exc.start:exc.end], f"is not UTF-8 ({exc.reason})") from None


def _undecodable(source: str, line: int, offset: int, found: bytes, problem: str) -> ConfigError:
    shown = " ".join(f"0x{b:02x}" for b in found[:4])
    return ConfigError.single(source, f"line {line}", Verbatim(f"byte {offset} ({shown})"),
                             f"{problem}; save the file as UTF-8")


def directory_problem(directory: Path) -> str | None:
    """Why ``directory`` cannot be a configuration directory, or None when it is one that can be listed."""
    try:
        info = os.stat(directory)
    except OSError as exc:
        return _os_problem(directory, exc, "directory")
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    try:
        os.listdir(directory)
    except OSError as exc:
        return _os_problem(directory, exc, "directory")
    return None
