"""StorageError and the PanDA pilot error codes a storage failure is reported with (PanDA pilot's
errorcodes): the pilot puts `code` in the job's error code and `diag` in its error dialog."""

from __future__ import annotations

STAGEINFAILED = 1099       # an input could not be copied for another reason (I/O error, no space, ...)
NOSTORAGE = 1133           # the endpoint's URL or the file's name gives no place in storage
STAGEOUTFAILED = 1137      # an output could not be written: root missing or not writable, I/O error
GETMD5MISMATCH = 1145      # an input's md5 differs from the catalog's
MISSINGOUTPUTFILE = 1165   # the payload did not write an output it declared
GETADMISMATCH = 1171       # an input's size or adler32 differs from the catalog's
PUTADMISMATCH = 1172       # what landed in storage is not what the payload wrote
FILEEXISTS = 1221          # another file (other content) is already at the output's path
MISSINGINPUTFILE = 1331    # an input is not in storage

NAMES = {
    STAGEINFAILED: "STAGEINFAILED", NOSTORAGE: "NOSTORAGE", STAGEOUTFAILED: "STAGEOUTFAILED",
    GETMD5MISMATCH: "GETMD5MISMATCH", MISSINGOUTPUTFILE: "MISSINGOUTPUTFILE", GETADMISMATCH: "GETADMISMATCH",
    PUTADMISMATCH: "PUTADMISMATCH", FILEEXISTS: "FILEEXISTS", MISSINGINPUTFILE: "MISSINGINPUTFILE",
}


class StorageError(Exception):
    """A storage operation failed; `code` is the PanDA pilot error code, `diag` one line saying what
    happened to which path (the job's error dialog)."""

    def __init__(self, code: int, diag: str):
        self.code = code
        self.diag = diag
        super().__init__(diag)

    @property
    def name(self) -> str:
        """PanDA's name of the code, e.g. "STAGEOUTFAILED"."""
        return NAMES.get(self.code, "UNKNOWN")

    def __repr__(self) -> str:
        return f"StorageError({self.code}, {self.diag!r})"
