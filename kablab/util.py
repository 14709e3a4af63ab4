"""Small shared helpers: atomic writes and schema validation."""

from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

# The schema lives in the repository's schema/ directory; KABLAB_SCHEMA overrides it
# (for a copy of the package installed elsewhere).
SCHEMA_PATH = Path(os.environ.get("KABLAB_SCHEMA") or
                   Path(__file__).resolve().parent.parent / "schema" / "result.schema.json")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write *data* to *path* via a temp file in the same directory + os.replace."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write *text* (UTF-8) to *path* atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=False, allow_nan=False) + "\n")


@lru_cache(maxsize=1)
def result_schema() -> dict[str, Any]:
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        return json.load(fh)


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    schema = result_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validation_errors(doc: Any) -> list[str]:
    """Return human-readable schema errors of a result document (empty = valid)."""
    errs = sorted(_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    out = []
    for e in errs:
        where = "/".join(str(p) for p in e.absolute_path) or "<root>"
        out.append(f"{where}: {e.message}")
    return out


def tail(text: str | None, lines: int = 20, max_chars: int = 4000) -> str | None:
    if text is None:
        return None
    t = "\n".join(text.rstrip("\n").splitlines()[-lines:])
    return t[-max_chars:]
