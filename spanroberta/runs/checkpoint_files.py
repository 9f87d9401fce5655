"""Whether the files of a checkpoint are whole, checked without loading them: a kill or a full disk while saving
leaves a file empty or cut short, which resuming would otherwise meet as a traceback deep in the Trainer.

- safetensors files (weights, whole or sharded): the 8-byte header length, the JSON header, and the end of the last
  tensor's bytes, which must be the end of the file;
- torch files (`optimizer.pt`, `scheduler.pt`, `rng_state*.pth`, `training_args.bin`, `pytorch_model.bin`,
  DeepSpeed's shards): `torch.save` writes a zip archive, whose directory sits at its end (a cut file has none)
  and whose members carry CRC-32 checksums, all read;
- JSON files (configs, `trainer_state.json`, a sharded model's index): they parse, and an index's shards are there;
- no `spanroberta_saving` mark: checkpoints saved in place (before they were written under a temporary name and
  renamed, `runs.checkpoints`) held it until their checksums were written, so one that still holds it was cut off
  in between; a checkpoint saved now never holds it;
- every file listed in the checkpoint's `spanroberta_checksums.json` (the size and CRC-32 of each file, written by
  `write_checksums` once the checkpoint is saved): its bytes are the ones saved. A file of the right length whose
  bytes changed (a copy garbled in the middle, a bit flipped on disk) passes every check above, and safetensors
  files carry no checksum of their own; loading one would train on its garbage without a word. CRC-32, as in the
  torch archives' members: it is there to catch damage, not tampering, and is the cheapest hash to read a large
  checkpoint with.
"""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from pathlib import Path

SAFETENSORS_SUFFIX = ".safetensors"
TORCH_SUFFIXES = (".pt", ".pth", ".bin")
CHECKSUMS_FILE = "spanroberta_checksums.json"
# Put into a checkpoint's folder by earlier versions before the Trainer saved it in place, and removed once its
# checksums were written: such a checkpoint that still holds it was cut off in between. Checkpoints saved now are
# written under a temporary name and renamed when whole, without it; it is only read, so that older ones still are.
SAVING_MARK = "spanroberta_saving"
_HASH_CHUNK_BYTES = 1 << 24
# Bytes of the little-endian integer that starts a safetensors file: the length of its JSON header.
_HEADER_LENGTH_BYTES = 8


def checkpoint_file_problem(folder: Path) -> str | None:
    """What is wrong with the first damaged file under `folder` (its path relative to `folder` first), or None."""
    if (folder / SAVING_MARK).exists():
        return (f"{SAVING_MARK} is still there: the run stopped while saving it, before its checksums were written "
                "(its files may be whole, but nothing says so)")
    for path in sorted(file for file in folder.rglob("*") if file.is_file()):
        problem = file_problem(path)
        if problem is not None:
            return f"{path.relative_to(folder)} {problem}"
    return _checksum_problem(folder)


def write_checksums(folder: Path) -> None:
    """Writes the size and CRC-32 of every file under the checkpoint `folder` into its CHECKSUMS_FILE, through a
    temporary file renamed into place, so that the list is whole or absent. Call it once every file is written."""
    checksums = {path.relative_to(folder).as_posix(): {"bytes": path.stat().st_size, "crc32": _crc32(path)}
                 for path in sorted(folder.rglob("*"))
                 if path.is_file() and path.name != CHECKSUMS_FILE}  # fmt: skip
    partial = folder / f".{CHECKSUMS_FILE}.partial"
    partial.write_text(json.dumps(checksums, indent=1), encoding="utf-8")
    os.replace(partial, folder / CHECKSUMS_FILE)


def _checksum_problem(folder: Path) -> str | None:
    listing = folder / CHECKSUMS_FILE
    if not listing.is_file():
        return None  # saved before checksums were written, or by another tool: the checks above are all there is
    for name, expected in json.loads(listing.read_text(encoding="utf-8")).items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing (it was saved with the checkpoint, {CHECKSUMS_FILE} says)"
        if path.stat().st_size != expected["bytes"] or _crc32(path) != expected["crc32"]:
            return (f"{name} is damaged (its bytes are not those saved: it fails the checksum in {CHECKSUMS_FILE}; "
                    f"if it was changed on purpose, delete {CHECKSUMS_FILE} from the checkpoint)")
    return None


def _crc32(path: Path) -> str:
    checksum = 0
    with path.open("rb") as file:
        while chunk := file.read(_HASH_CHUNK_BYTES):
            checksum = zlib.crc32(chunk, checksum)
    return f"{checksum:08x}"


def file_problem(path: Path) -> str | None:
    """Why the checkpoint file at `path` is damaged (a phrase after its name), or None when it is whole or of a
    kind not checked."""
    if path.suffix == SAFETENSORS_SUFFIX:
        return _safetensors_problem(path)
    if path.suffix in TORCH_SUFFIXES:
        return _torch_file_problem(path)
    if path.suffix == ".json":
        return _json_problem(path)
    return None


def _safetensors_problem(path: Path) -> str | None:
    size = path.stat().st_size
    if size == 0:
        return "is empty"
    with path.open("rb") as file:
        prefix = file.read(_HEADER_LENGTH_BYTES)
        if len(prefix) < _HEADER_LENGTH_BYTES:
            return f"is cut short ({size} bytes, shorter than a safetensors header)"
        header_length = int.from_bytes(prefix, "little")
        if _HEADER_LENGTH_BYTES + header_length > size:
            return f"is cut short (its header says {header_length} header bytes; the file holds {size} bytes)"
        try:
            header = json.loads(file.read(header_length))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return "has a damaged header (not JSON)"
    if not isinstance(header, dict):
        return "has a damaged header (not a JSON object)"
    try:
        data_end = max((int(entry["data_offsets"][1]) for name, entry in header.items() if name != "__metadata__"),
                       default=0)  # fmt: skip
    except (TypeError, KeyError, IndexError, ValueError):
        return "has a damaged header (a tensor without data offsets)"
    expected = _HEADER_LENGTH_BYTES + header_length + data_end
    if expected != size:
        how = "cut short" if size < expected else "longer than its header says"
        return f"is {how} ({size} bytes; its header says {expected})"
    return None


def _torch_file_problem(path: Path) -> str | None:
    if path.stat().st_size == 0:
        return "is empty"
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except (zipfile.BadZipFile, EOFError, OSError) as error:
        return f"is cut short or damaged (not a whole torch archive: {error})"
    return None if damaged is None else f"is damaged ({damaged} fails its checksum)"


def _json_problem(path: Path) -> str | None:
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return "is cut short or damaged (not valid JSON)"
    if path.name.endswith(".index.json") and isinstance(content, dict):
        shards = set((content.get("weight_map") or {}).values())
        missing = sorted(shard for shard in shards if not (path.parent / shard).is_file())
        if missing:
            return f"names shards that are missing: {', '.join(missing[:3])}"
    return None
