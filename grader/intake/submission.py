"""`submission` finds a submission's exercise files (folder or zip) and stages them for the worker.

Only the file names in the contract are ever read; everything else a submission holds (a
conftest.py, a copy of the tests, a sitecustomize.py) is ignored. The staged folder holds the kit's
own `__init__.py` and `config.py` beside those files, and the worker's code.
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import stat
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from grader import inside
from grader.curriculum import SUBMISSION_FILES, TRACKS
from grader.intake import notebook, stubs
from grader.lang import tr
from grader.text import clean

MAX_FILE_BYTES = 1 * 2**20
MAX_ZIP_ENTRIES = 10_000
MAX_ZIP_BYTES = 64 * 2**20
MAX_FOLDER_DEPTH = 4  # how far below the submission's top the exercise files are looked for
NOTEBOOKS_NAMED = 5  # in a note about the notebooks read: the first few by name, then how many more
READABLE_COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)


class SubmissionInputError(ValueError):
    """The path given is not a submission we can read (missing, not a folder or zip, unsafe zip)."""


@dataclass(frozen=True)
class Submission:
    name: str
    files: dict[str, bytes]
    notes: tuple[str, ...] = field(default=())
    folder: str = "exercises"  # where the files were read (inside `archive`, when a zip), as the student named it
    archive: str = ""
    from_notebooks: dict[str, str] = field(default_factory=dict)  # exercise file -> the notebook cells it was made of
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)  # exercise file -> the files it was read from

    @property
    def missing(self) -> frozenset[str]:
        return frozenset(name for name in SUBMISSION_FILES if name not in self.files)

    @property
    def unparsed(self) -> dict[str, str]:
        """The files made from notebook cells that do not parse, and the one line that names the cell."""
        return {name: why for name in self.from_notebooks if (why := notebook.unparsed(self.files[name]))}

    @property
    def open(self) -> frozenset[str]:
        """The exercise files a notebook's definitions may supply: those missing, and the untouched stubs."""
        return self.missing | {name for name, data in self.files.items() if stubs.untouched(name, data)}

    def to_json(self) -> dict[str, Any]:
        """What intake found, as plain JSON (the files base64): how a cluster batch sends it to a Dask worker."""
        files = {name: base64.b64encode(data).decode() for name, data in self.files.items()}
        return {"name": self.name, "files": files,
                "notes": list(self.notes), "folder": self.folder, "archive": self.archive,
                "from_notebooks": dict(self.from_notebooks), "sources": {k: list(v) for k, v in self.sources.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Submission:
        """The submission `to_json` wrote. Only the contract's file names, each within MAX_FILE_BYTES, are taken:
        intake's rules hold on arrival as they did where it ran."""
        try:
            files = {name: base64.b64decode(text, validate=True) for name, text in data["files"].items()}
            if set(files) <= set(SUBMISSION_FILES) and all(len(b) <= MAX_FILE_BYTES for b in files.values()):
                return cls(str(data["name"]), files, tuple(map(str, data["notes"])), folder=str(data["folder"]),
                           archive=str(data["archive"]),
                           from_notebooks={str(k): str(v) for k, v in data["from_notebooks"].items() if k in files},
                           sources={str(k): tuple(map(str, v)) for k, v in data["sources"].items() if k in files})
        except (KeyError, TypeError, ValueError, AttributeError):
            pass
        raise SubmissionInputError(tr("the submission arrived damaged: grade it again"))

    def shown(self, filename: str) -> str:
        """Where `filename` of this submission is, for a message that says which file to open."""
        if filename in self.from_notebooks:
            return self.from_notebooks[filename]  # "cell 4 of lab.ipynb"
        joined = f"{self.folder}/{filename}" if self.archive else str(Path(self.folder) / filename)  # zip: "/"
        where = filename if self.folder in ("", ".") else joined
        return tr("{file} in {archive}", file=where, archive=self.archive) if self.archive else where


def load(path: Path) -> Submission:
    """Read the exercise files of the folder or .zip at `path`."""
    if not path.exists():
        raise SubmissionInputError(tr("submission {path} does not exist: give a folder, a .zip or a notebook",
                                      path=repr(str(path))))
    if path.is_dir():
        return _found(_from_folder(path), tr("the folder {path}", path=repr(str(path))),
                      depth=tr("up to {count} levels deep", count=MAX_FOLDER_DEPTH))
    if path.suffix.lower() == ".ipynb" and path.is_file():
        # Only this notebook: a `%grader use` line never makes the grader read another file (a classmate's).
        return _found(_with_notebooks(Submission(path.stem, {}, folder="."), [(path.name, read_notebook(path))]),
                      path.name, depth=tr("in its code cells"))
    if zipfile.is_zipfile(path):
        return _found(_from_zip(path), path.name, depth=tr("at any depth"))
    if path.suffix.lower() == ".zip":
        raise SubmissionInputError(tr("{name} is not a valid zip archive (not a readable zip file: truncated or "
                                      "corrupt); zip it again", name=path.name))
    raise SubmissionInputError(tr("submission {path} is neither a folder, a .zip nor a notebook (.ipynb)",
                                  path=repr(str(path))))


def _found(loaded: Submission, where: str, *, depth: str) -> Submission:
    """`loaded`, unless it holds no exercise file at all: then one line says where we looked, for what."""
    if loaded.files:
        return loaded
    ignored = tr(" ({notes})", notes="; ".join(loaded.notes)) if loaded.notes else ""
    expected = "; ".join(f"{track.exercises[0].file}, {track.exercises[1].file}, ..., {track.exercises[-1].file}"
                         for track in TRACKS if len(track.exercises) > 2)  # each track's: a student knows one
    raise SubmissionInputError(tr(
        "no exercise file found in {where}{ignored}: looked at its top and in the folders below it ({depth}) for "
        "{expected} (the files of the kit's exercises/ folder) and for notebooks (.ipynb) defining them",
        where=where, ignored=ignored, depth=depth, expected=expected))


def exercise_folder(path: Path) -> Path:
    """The folder under `path` that holds its exercise files, chosen as in a zip (`_exercise_folder`): the one holding
    the most, up to MAX_FOLDER_DEPTH levels below it; a tie goes to the shallowest, then to exercises/, then by name.
    So a folder and its zip are graded from the same files (a stray attention.py at the top does not hide a full
    exercises/ below it). Hidden folders and symbolic links are not followed.
    """
    best, most = path, 0
    level = [path]
    for _ in range(MAX_FOLDER_DEPTH + 1):
        ordered = sorted(level, key=lambda folder: (folder.name != "exercises", folder.name))
        for folder in ordered:
            count = sum((folder / name).is_file() for name in SUBMISSION_FILES)
            if count > most:
                best, most = folder, count
        if most == len(SUBMISSION_FILES):
            return best  # no folder deeper down can hold more
        level = [child for folder in ordered for child in _subfolders(folder)]
    return best


def _subfolders(folder: Path) -> list[Path]:
    try:
        return [child for child in folder.iterdir()
                if child.is_dir() and not child.is_symlink() and not child.name.startswith((".", "__"))]
    except OSError:
        return []


def _from_folder(path: Path) -> Submission:
    top = exercise_folder(path)
    files: dict[str, bytes] = {}
    notes: list[str] = []
    for name in SUBMISSION_FILES:
        candidate = top / name
        if candidate.is_symlink():
            notes.append(tr("{name} is a symbolic link and was ignored", name=name))
        elif candidate.is_file():
            size = candidate.stat().st_size
            if size > MAX_FILE_BYTES:
                notes.append(tr("{name} is {size} bytes, over the {limit} byte limit, and was ignored", name=name,
                                size=size, limit=MAX_FILE_BYTES))
            else:
                try:
                    files[name] = candidate.read_bytes()
                except OSError as error:
                    raise SubmissionInputError(tr("{name} in {folder} cannot be read ({error})", name=name,
                                                  folder=path.name, error=error.strerror)) from None
    graded = top.relative_to(path)
    for above in reversed(graded.parents):  # the top, then each folder between it and the one graded
        notes += _not_graded([name for name in SUBMISSION_FILES if (path / above / name).is_file()], above.as_posix(),
                             graded.as_posix())
    loaded = Submission(path.name, files, tuple(notes), folder=str(top),
                        sources={name: ((top.relative_to(path) / name).as_posix(),) for name in files})
    if not loaded.open:
        return loaded
    notebooks = [(found.relative_to(path).as_posix(), read_notebook(found)) for found in _notebooks_in(path)]
    return _with_notebooks(loaded, notebooks)


def _from_zip(path: Path) -> Submission:
    try:
        archive = zipfile.ZipFile(path)
    except Exception as error:  # the zip's bytes are the submitter's: any failure is theirs
        raise SubmissionInputError(tr("{name} is not a valid zip archive ({error})", name=path.name,
                                      error=error)) from None
    with archive:
        entries = archive.infolist()
        if len(entries) > MAX_ZIP_ENTRIES:
            raise SubmissionInputError(tr("{name} holds {count} entries, over the {limit} limit", name=path.name,
                                          count=len(entries), limit=MAX_ZIP_ENTRIES))
        if sum(entry.file_size for entry in entries) > MAX_ZIP_BYTES:
            raise SubmissionInputError(tr("{name} unpacks to more than {size} MiB", name=path.name,
                                          size=MAX_ZIP_BYTES // 2**20))
        by_path: dict[PurePosixPath, zipfile.ZipInfo] = {}
        for entry in entries:
            name = PurePosixPath(entry.filename)
            if name.is_absolute() or ".." in name.parts or "\\" in entry.filename:
                raise SubmissionInputError(tr("{name} holds an unsafe path {path}", name=path.name,
                                              path=repr(entry.filename)))
            kind = stat.S_IFMT(entry.external_attr >> 16)  # 0 where the zip tool recorded no file type
            if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
                raise SubmissionInputError(tr("{name} holds a link or special file {path}", name=path.name,
                                              path=repr(entry.filename)))
            if not entry.is_dir():
                by_path[name] = entry
        folder = _exercise_folder(by_path)
        files: dict[str, bytes] = {}
        notes: list[str] = []
        for filename in SUBMISSION_FILES:
            entry = by_path.get(folder / filename)
            if entry is None:
                continue
            if entry.file_size > MAX_FILE_BYTES:
                notes.append(tr("{name} is over the {limit} byte limit and was ignored", name=filename,
                                limit=MAX_FILE_BYTES))
                continue
            files[filename] = _read_entry(archive, entry, path.name)[:MAX_FILE_BYTES]
        for above in reversed(folder.parents):  # the zip's top, then each folder between it and the one graded
            notes += _not_graded([name for name in SUBMISSION_FILES if above / name in by_path], above.as_posix(),
                                 folder.as_posix())
        loaded = Submission(path.stem, files, tuple(notes), folder=str(folder), archive=str(path),
                            sources={name: ((folder / name).as_posix(),) for name in files})
        if not loaded.open:
            return loaded
        notebooks = [(str(name), _read_entry(archive, entry, path.name)) for name, entry in sorted(by_path.items())
                     if name.suffix.lower() == ".ipynb" and not any(part.startswith((".", "__")) for part in name.parts)
                     and entry.file_size <= notebook.MAX_NOTEBOOK_BYTES]
    return _with_notebooks(loaded, notebooks)


def _not_graded(names: list[str], where: str, graded: str) -> list[str]:
    """The note for exercise files found above the folder graded (`where`, "." for the top), which a student may
    have meant: an old full copy in a subfolder is graded over newer work at the top, and says so here."""
    if not names:
        return []
    return [tr("{names} at {where} not graded: the folder {graded} holds more exercise files and is the one graded "
               "(move or delete the copy you do not mean)", names=", ".join(names),
               where=tr("the top") if where == "." else clean(where, newlines=False),
               graded=clean(graded, newlines=False))]  # folder names are the submission's text: one line each


def _read_entry(archive: zipfile.ZipFile, entry: zipfile.ZipInfo, zip_name: str) -> bytes:
    """One file of the zip; any way it cannot be read (encrypted, unknown compression, corrupt) refuses the zip."""
    where = f"{zip_name}: {entry.filename!r}"
    if entry.flag_bits & 0x1:
        raise SubmissionInputError(tr("{where} is encrypted: zip it again without a password", where=where))
    if entry.compress_type not in READABLE_COMPRESSIONS:
        method = zipfile.compressor_names.get(entry.compress_type,
                                              tr("method {number}", number=entry.compress_type))
        raise SubmissionInputError(tr("{where} uses a compression this grader cannot read ({method}): zip it again "
                                      "with the usual (deflate) compression", where=where, method=method))
    try:
        return archive.read(entry)
    except Exception as error:  # bad CRC, truncated data, a broken compressed stream, ...
        raise SubmissionInputError(tr("{where} cannot be read, the zip is corrupt ({error})", where=where,
                                      error=f"{type(error).__name__}: {error}")) from None


def _exercise_folder(paths: dict[PurePosixPath, zipfile.ZipInfo]) -> PurePosixPath:
    """The folder inside the zip that holds the most exercise files, at any depth; a tie goes to the
    shallowest, then to one named exercises/ (macOS's __MACOSX/ copies are never chosen)."""
    counts: dict[PurePosixPath, int] = {}
    for name in paths:
        if name.name in SUBMISSION_FILES and not name.parts[0].startswith("__"):
            counts[name.parent] = counts.get(name.parent, 0) + 1
    if not counts:
        return PurePosixPath(".")
    return min(counts, key=lambda folder: (-counts[folder], len(folder.parts), folder.name != "exercises",
                                           str(folder)))


def _with_notebooks(loaded: Submission, notebooks: list[tuple[str, bytes]]) -> Submission:
    """`loaded`, its missing exercise files and untouched stubs made from `notebooks` (name, bytes), in name
    order."""
    if not notebooks:
        return loaded
    cells: list[notebook.Cell] = []
    for name, data in notebooks:
        try:
            cells += notebook.cells(data, name=name)
        except notebook.NotebookError as error:
            cells.append(notebook.unreadable(data, name=name, why=str(error)))
    made = notebook.extract(cells)
    added = {name: data for name, data in made.files.items()
             if name in loaded.missing or (name in loaded.open and not stubs.only_stub_code(name, data))}
    replaced = sorted(set(added) & set(loaded.files))  # the stubs the notebooks' work stands in for
    # The notebooks' names, on one line each and a few of them: a note is shown, and a name is the submission's text.
    names = [clean(name, newlines=False) for name, _ in notebooks]
    read = ", ".join(names[:NOTEBOOKS_NAMED])
    if len(names) > NOTEBOOKS_NAMED:
        read = tr("{names} and {count} more", names=read, count=len(names) - NOTEBOOKS_NAMED)
    notes = (*loaded.notes, *(tr("{notebooks}: {note}", notebooks=read, note=note) for note in made.notes),
             *(tr("{name} is the kit's untouched stub: graded from {notebooks} instead", name=name,
                  notebooks=clean(made.origins[name], newlines=False)) for name in replaced))
    return replace(loaded, files={**loaded.files, **added}, notes=notes,
                   from_notebooks={**loaded.from_notebooks, **{name: made.origins[name] for name in added}},
                   sources={**loaded.sources, **{name: made.notebooks[name] for name in added}})


def _notebooks_in(path: Path) -> list[Path]:
    """The notebooks in the folder `path` and below it (not in hidden folders, like .ipynb_checkpoints/)."""
    found, level = [], [path]
    for _ in range(MAX_FOLDER_DEPTH + 1):
        for folder in level:
            with contextlib.suppress(OSError):
                found += [child for child in folder.glob("*.ipynb") if child.is_file() and not child.is_symlink()]
        level = [child for folder in level for child in _subfolders(folder)]
    return sorted(found, key=lambda notebook_path: notebook_path.relative_to(path).parts)


def read_notebook(path: Path) -> bytes:
    """A notebook's bytes; one past the size limit is enough to refuse it as too large."""
    try:
        with path.open("rb") as file:
            return file.read(notebook.MAX_NOTEBOOK_BYTES + 1)
    except OSError as error:
        raise SubmissionInputError(tr("{name} cannot be read ({error})", name=path.name,
                                      error=error.strerror)) from None


# Modes of the stage's own: the sandbox's user (uid 65534, or bubblewrap's mapped uid) reads what is staged, whatever
# the modes of the kit's folder (Gradescope's setup.sh makes it root's alone) and whatever the umask.
STAGED_FOLDER_MODE = 0o755
STAGED_FILE_MODE = 0o644


def stage_worker(into: Path) -> None:
    """Write the worker's package, `into/gradeworker`: all of grader/inside/, the code the zygote and workers run.

    Written file by file with modes of its own, never copied with the kit's: `shutil.copytree` keeps the
    source's modes, and a kit folder locked with `chmod -R go-rwx` would stage a worker its sandbox cannot read."""
    source = Path(inside.__path__[0])
    for path in sorted(source.rglob("*.py")):
        if "__pycache__" not in path.parts:
            _stage_file(into / "gradeworker" / path.relative_to(source), path.read_bytes(), top=into)


def stage_exercises(submission: Submission, *, kit_root: Path, into: Path) -> None:
    """(Re)write `into/exercises`, the package the worker imports: the kit's config and the submission."""
    package = into / "exercises"
    shutil.rmtree(package, ignore_errors=True)
    kit_exercises = kit_root / "exercises"
    for provided in ("__init__.py", "config.py"):
        _stage_file(package / provided, (kit_exercises / provided).read_bytes(), top=into)
    for name, data in submission.files.items():
        _stage_file(package / name, data, top=into)


def _stage_file(path: Path, data: bytes, *, top: Path) -> None:
    """Write `data` to `path` (a file below `top`) as 0644, making the folders between them 0755."""
    folders = [folder for folder in path.parents if folder.is_relative_to(top) and folder != top]
    for folder in reversed(folders):
        folder.mkdir(exist_ok=True)
        folder.chmod(STAGED_FOLDER_MODE)  # mkdir's mode is cut by the umask; chmod's is not
    path.write_bytes(data)
    path.chmod(STAGED_FILE_MODE)
