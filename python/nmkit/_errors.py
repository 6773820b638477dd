"""nmkit.Error and its subclasses: every error of the C++ library reaches Python as one of them.

Each carries the library's one-line ``message`` (also ``str(e)``), its ``code`` (nmkit.ErrorCode) and,
where the library knows them, the ``file`` and ``tensor`` it concerns. A subclass per code also
derives from the Python exception a caller expects: ValueError for bad arguments and bad input data,
OSError for files that cannot be found, read or written.
"""

from __future__ import annotations


class Error(Exception):
    """An error reported by nmkit's library (the message names the file, tensor and value)."""

    def __init__(self, message: str, code=None, file: str | None = None, tensor: str | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.file = file
        self.tensor = tensor

    def __str__(self) -> str:
        return self.message


class InvalidArgumentError(Error, ValueError):
    """An option or parameter out of range: a bad pattern, an unknown dtype or format name."""


class InvalidFileError(Error, ValueError):
    """Malformed or inconsistent file contents: a header, a record, a stored weight."""


class InvalidValueError(Error, ValueError):
    """A value the operation cannot take: NaN, infinity, a non-compliant weight."""


class UnsupportedError(Error, ValueError):
    """Well-formed but not handled: a dtype, format or rank nmkit does not run."""


class LimitError(Error, ValueError):
    """A size or count above what nmkit accepts."""


class NotFoundError(Error, FileNotFoundError):
    """A file or tensor that is not there."""


class IoError(Error, OSError):
    """The operating system refused: open, map, write, rename."""


class SameFileError(Error, OSError):
    """An output that is one of the inputs."""


_BY_CODE = {
    "InvalidArgument": InvalidArgumentError,
    "InvalidFile": InvalidFileError,
    "InvalidValue": InvalidValueError,
    "Unsupported": UnsupportedError,
    "Limit": LimitError,
    "NotFound": NotFoundError,
    "Io": IoError,
    "SameFile": SameFileError,
}


def _from_library(code, message: str, file: str | None, tensor: str | None) -> Error:
    """The exception for a library error (called by the extension module's translator).

    Errors the library has not classified (ErrorCode.Unspecified) are nearly all bad input, so they
    are ValueErrors too; files and I/O carry their own codes."""
    cls = _BY_CODE.get(code.name, InvalidValueError)
    error = cls(message, code, file, tensor)
    if isinstance(error, OSError):
        error.filename = file
    return error


for _cls in (Error, *_BY_CODE.values()):
    _cls.__module__ = "nmkit"
