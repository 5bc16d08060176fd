"""Reading and writing suite folders: one YAML file per sample, run records under ``runs/``.

Every sample is validated on load; an error names the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from tracejudge._errors import InputError
from tracejudge._inputfile import decode_text
from tracejudge._yamlfile import node_line, parse_yaml, require_mapping, validation_lines
from tracejudge.schema import Sample, SuiteRun

_HINT = (
    'fix the sample; its layout is in "File formats" in the README'
    " (schema_version, id, kind, group, split, source, input, ...)"
)
RUNS_DIR = "runs"


@dataclass(frozen=True)
class LoadedSample:
    """A sample and the file it was read from."""

    sample: Sample
    path: Path

    @property
    def hash(self) -> str:
        """Hash of the sample's content (which version of it ran)."""
        return sample_hash(self.sample)


@dataclass(frozen=True)
class Suite:
    """A suite folder's samples (sorted by file name) and past runs (oldest first)."""

    path: Path
    samples: tuple[LoadedSample, ...]
    runs_path: Path | None = None
    """Where run records are read and written (default ``<path>/runs``)."""

    @property
    def runs_dir(self) -> Path:
        """The folder of run records: ``runs_path``, else ``<path>/runs``."""
        return self.runs_path if self.runs_path is not None else self.path / RUNS_DIR

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def active(self) -> list[LoadedSample]:
        """Samples that are run and pushed."""
        return [s for s in self.samples if s.sample.status == "active"]

    def runs(self) -> list[SuiteRun]:
        """Stored run records, oldest first."""
        return load_runs(self.path, runs_dir=self.runs_dir)


def sample_hash(sample: Sample) -> str:
    """sha256 (16 hex) of the sample's canonical JSON."""
    canon = json.dumps(sample.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def parse_sample(text: str, *, source: str = "<sample>") -> Sample:
    """Parse and validate one sample. Raises :class:`InputError` naming ``source:line: field``."""
    raw, root = parse_yaml(text, source=source, hint=_HINT)
    data = require_mapping(raw, source=source, noun="sample", hint=_HINT)
    version = data.get("schema_version")
    if version is None:
        raise InputError(f"{source}:1: schema_version: missing", hint=_HINT)
    if version != 1:
        line = node_line(root, ("schema_version",))
        raise InputError(
            f"{source}:{line}: schema_version: {version!r} is not supported (this tracejudge reads 1)",
            hint="upgrade tracejudge, or rebuild the suite with `tracejudge regress build`",
        )
    try:
        return Sample.model_validate(data)
    except ValidationError as exc:
        msg = validation_lines(exc, lambda loc: f"{source}:{node_line(root, loc)}")
        raise InputError("invalid sample:\n  " + msg, hint=_HINT) from None


def sample_files(path: Path) -> list[Path]:
    """The sample files of a suite folder (``*.yaml``/``*.yml`` at its top level), sorted."""
    if not path.exists():
        raise InputError(f"{path}: no such suite folder", hint="build one with `tracejudge regress build`")
    if not path.is_dir():
        raise InputError(f"{path}: a suite is a folder of sample files", hint="pass the suite folder")
    return sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in (".yaml", ".yml"))


def load_suite(path: str | Path, *, runs_dir: Path | None = None) -> Suite:
    """Read and validate every sample of a suite folder. Ids must be unique and match the file name.
    ``runs_dir`` keeps run records elsewhere than ``<path>/runs``."""
    folder = Path(path)
    loaded: list[LoadedSample] = []
    seen: dict[str, Path] = {}
    for f in sample_files(folder):
        try:
            data = f.read_bytes()
        except OSError as exc:
            raise InputError(f"{f}: cannot be read: {exc}", hint=_HINT) from None
        sample = parse_sample(decode_text(data, source=str(f)), source=str(f))
        if sample.id in seen:
            raise InputError(
                f"{f}: id: {sample.id} is also the id of {seen[sample.id]}",
                hint="sample ids are unique in a suite; remove the copy",
            )
        seen[sample.id] = f
        loaded.append(LoadedSample(sample, f))
    if not loaded:
        raise InputError(f"{folder}: no sample files (*.yaml) in this folder", hint=_HINT)
    return Suite(folder, tuple(loaded), runs_dir)


def dump_sample(sample: Sample) -> str:
    """The YAML text of a sample (keys in the record's order; ``schema_version`` first)."""
    data = sample.model_dump(mode="json", by_alias=True, exclude_defaults=False)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def write_sample(folder: Path, sample: Sample) -> Path:
    """Write one sample as ``<folder>/<id>.yaml``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{sample.id}.yaml"
    out.write_text(dump_sample(sample), encoding="utf-8")
    return out


def load_runs(folder: Path, *, runs_dir: Path | None = None) -> list[SuiteRun]:
    """Run records of a suite (in ``runs_dir``, default ``<folder>/runs``), oldest first. A record that
    does not validate is an input error."""
    runs_dir = runs_dir if runs_dir is not None else folder / RUNS_DIR
    if not runs_dir.is_dir():
        return []
    out: list[SuiteRun] = []
    for f in sorted(runs_dir.glob("*.json")):
        try:
            out.append(SuiteRun.model_validate_json(f.read_text(encoding="utf-8")))
        except (OSError, ValidationError) as exc:
            first = str(exc).splitlines()[0]
            raise InputError(f"{f}: not a run record: {first}", hint="remove or restore the file") from None
    out.sort(key=lambda r: (r.created_at, r.run_id))
    return out


def write_run(folder: Path, run: SuiteRun, *, runs_dir: Path | None = None) -> Path:
    """Store a run record as ``<runs_dir>/<run_id>.json`` (default ``<folder>/runs``); an existing record
    is never overwritten."""
    runs_dir = runs_dir if runs_dir is not None else folder / RUNS_DIR
    runs_dir.mkdir(parents=True, exist_ok=True)
    out = runs_dir / f"{run.run_id}.json"
    with out.open("x", encoding="utf-8") as fh:
        fh.write(run.model_dump_json(indent=2) + "\n")
    return out
