"""Reading and writing the files a user names: checked before use, written atomically.

Every file the tools read (specs, results, traces, configs) goes through `read_text`: it is
stat-ed first, so a folder, a named pipe or a device is refused without being opened (a FIFO
would block forever), and a file larger than the reader's limit is refused before it is read.
Every file the tools write goes through `check_output` before any work starts and through
`write_text`/`replace_from` at the end: a temporary file in the same folder, then `os.replace`,
with the permissions an ordinary `open()` would give (0666 less the umask).
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import InvalidInputError, SpecError

MiB = 2**20


def _describe(e: OSError) -> str:
    return e.strerror or str(e)


def _stat(path: Path) -> os.stat_result | None:
    """`os.stat`, None when nothing is there; other failures (name too long...) refused."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as e:
        raise InvalidInputError(
            f"cannot use '{_short(path)}': {_describe(e)}; give a shorter or different path"
        ) from None


def _short(path: Path | str, limit: int = 120) -> str:
    """A path fit for a one-line message (a 5,000-character name is cut in the middle)."""
    s = str(path)
    return s if len(s) <= limit else f"{s[: limit // 2]}…{s[-limit // 2 :]}"


def is_regular_file(path: str | Path) -> bool:
    """True for an existing regular file; never raises, never opens the file."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_text(
    path: str | Path, what: str, limit_bytes: int, error: type[Exception] = SpecError
) -> str:
    """The UTF-8 text of a regular file of at most `limit_bytes`, or `error` saying why not
    (`what` names the file's role: "spec file", "results file", "trace")."""
    path = Path(path)
    try:
        st = _stat(path)
    except InvalidInputError as e:
        raise error(str(e)) from None
    if st is None:
        raise error(f"{_short(path)}: cannot read {what} (no such file); check the path")
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{_short(path)}: is a folder, not a {what}; give the file inside it")
    if not stat.S_ISREG(st.st_mode):
        raise error(
            f"{_short(path)}: not a regular file (a pipe or a device?); give a {what} on disk"
        )
    if st.st_size > limit_bytes:
        raise error(
            f"{_short(path)}: {st.st_size:,} bytes is more than a {what} may hold "
            f"({limit_bytes:,}); give the right file"
        )
    try:
        with open(path, "rb") as f:
            data = f.read(limit_bytes + 1)
    except OSError as e:
        raise error(f"{_short(path)}: cannot read {what} ({_describe(e)})") from None
    if len(data) > limit_bytes:
        raise error(f"{_short(path)}: more than {limit_bytes:,} bytes; give the right file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(
            f"{_short(path)}: not UTF-8 text (byte {e.start}); give a text {what}, "
            "not a binary file"
        ) from None


def check_output(path: str | Path, what: str = "output") -> Path:
    """Refuse, before any work starts, an output path that could not be written at the end:
    a folder, a pipe or device, a missing or read-only folder, a name the system refuses."""
    path = Path(path)
    if str(path) in ("", ".") or path.name in ("", ".", ".."):
        raise InvalidInputError(f"{what} '{_short(path)}' is not a file name; give one")
    try:
        name_max = os.pathconf(path.parent if str(path.parent) else ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    if len(os.fsencode(path.name)) > name_max:
        raise InvalidInputError(
            f"{what} name '{_short(path.name)}' is longer than the "
            f"{name_max} bytes a file name may have; give a shorter one"
        )
    st = _stat(path)
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise InvalidInputError(
                f"{what} '{_short(path)}' is a folder; give a file name inside it"
            )
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInputError(
                f"{what} '{_short(path)}' is not a regular file (a pipe "
                "or a device?); give a file name"
            )
    folder = path.parent
    fst = _stat(folder)
    if fst is None:
        raise InvalidInputError(
            f"folder '{_short(folder)}' of {what} '{_short(path.name)}' "
            "does not exist; create it first"
        )
    if not stat.S_ISDIR(fst.st_mode):
        raise InvalidInputError(
            f"'{_short(folder)}' is not a folder, so {what} "
            f"'{_short(path)}' cannot be written there; give another path"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidInputError(
            f"folder '{_short(folder)}' is not writable, so {what} "
            f"'{_short(path.name)}' cannot be written; give another path"
        )
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def replace_from(path: str | Path, write: Callable[[Path], object], what: str = "output") -> Path:
    """Create `path` atomically: `write(tmp)` fills a temporary file in the same folder, which
    then replaces `path` (readers never see half a file; a failure leaves `path` as it was;
    a replaced file keeps its permissions). Every writer comes through here, so the checks of
    `check_output` run on every output path: a device, a FIFO, a folder or a symlink to one is
    refused, never replaced."""
    path = check_output(path, what)
    fd, name = tempfile.mkstemp(
        prefix=f".{path.stem[:100]}.", suffix=path.suffix[:20], dir=path.parent
    )
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        # a replaced file keeps its permissions (a 0600 result stays private); a new one
        # gets the ordinary ones the umask leaves
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        if e.errno in (
            errno.ENOSPC,
            errno.EDQUOT,
            errno.EACCES,
            errno.EROFS,
            errno.EPERM,
            errno.EFBIG,
        ):
            raise InvalidInputError(f"cannot write '{_short(path)}': {_describe(e)}") from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically, with ordinary permissions."""
    return replace_from(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP until the block is done (a file being saved after an
    interrupt is finished first); a signal that came meanwhile is delivered on exit."""
    held = {getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, ValueError, OSError):  # no sigmask here: save unprotected
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
