"""Reading an .npz archive (what ``np.savez`` writes): every array by name, or one line saying why not."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np


class NpzError(ValueError):
    """A file that is not a readable .npz archive; the message is one line naming the file."""


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of the .npz at ``path`` by name (no pickled objects)."""
    if not Path(path).is_file():  # a FIFO or a device would block or never end
        what = "not a regular file" if Path(path).exists() else "no such file"
        raise NpzError(f"{path}: {what}")
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        with open(path, "rb") as f:
            head = f.read(6)
        if not head.startswith(b"PK") and not head.startswith(b"\x93NUMPY"):
            # numpy takes anything else for a pickle and advises allow_pickle, which would not help
            raise NpzError(f"{path}: not an .npz archive (np.savez writes one: a zip of .npy arrays)") from None
        raise NpzError(f"{path}: not a readable .npz ({_first_line(e)})") from None
    if not isinstance(z, np.lib.npyio.NpzFile):  # np.load also reads a single .npy array, whatever the name
        raise NpzError(f"{path}: not an .npz archive but a single .npy array (np.savez writes an .npz)")
    try:
        with z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
        raise NpzError(f"{path}: not a readable .npz ({_first_line(e)})") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
