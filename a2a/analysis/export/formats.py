"""The tuning-file formats, and a decision table exported in one of them."""
from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from a2a.analysis.export import intel, mpich, ompi, ompi_json
from a2a.analysis.export.common import Exported, library_only
from a2a.errors import BadInput
from a2a.mpi import bench_words
from a2a.mpilib import PROFILES, profile_of
from a2a.record.decision import read_decision
from a2a.record.results import write_atomic

UNWRITTEN = "\0"  # the path of a file not written: variables that name it cannot be given


def formats() -> dict[str, Callable[..., Exported]]:
    """Format name -> exporter."""
    return {"ompi": ompi.export, "ompi-json": ompi_json.export, "mpich": mpich.export,
            "intel": intel.export}


def export_lines(table: Path, library: str) -> list[str]:
    """The `bench export` lines for the library a record was measured with (its default format; each library's when
    it is unknown), each writing its file beside the table."""
    files = profile_of(library).files[:1] or [profile.files[0] for profile in PROFILES]
    return [shlex.join([*bench_words(), "export", str(table), "--format", file.format, "-o",
                        str(table.parent / f"tuned.{file.suffix}")]) for file in files]


def export(decision: Path | str, fmt: str, output: Path | None = None, **options: Any) -> Exported:
    """Export a decision.json in `fmt`; write it atomically to `output` when given."""
    exporters = formats()
    if fmt not in exporters:
        raise BadInput(f"unknown format {fmt!r}; accepted: {', '.join(exporters)}")
    exported = exporters[fmt](read_decision(decision), **options)
    if output is not None:
        if not Path(output).parent.is_dir():
            raise BadInput(f"cannot write {output}: directory {Path(output).parent} does not exist")
        write_atomic(Path(output), exported.text)
    return exported


def export_report(decision: Path | str, fmt: str, output: Path | None, libmpi: str | None = None,
                  env_only: bool = False) -> tuple[str, list[str]]:
    """`bench export` as (what goes to stdout, what goes to stderr): the file's text when not written, or how to
    apply the file written (only its variables with `env_only`); the warnings."""
    if libmpi and fmt != "mpich":
        raise BadInput("--libmpi goes with --format mpich only (only MPICH's library is read)")
    if env_only and not output:
        raise BadInput("--env needs --output FILE")
    exported = export(decision, fmt, output, **({"libmpi": libmpi} if libmpi else {}))
    said = [f"warning: {warning}" for warning in exported.warnings]
    if library_only(read_decision(decision)):
        said.append("nothing to apply: the table leaves every size to the library's own choice (native); the file "
                    "only says so")
        return "" if env_only else f"wrote {output}" if output else exported.text.rstrip("\n"), said
    if env_only:
        assert output is not None  # --env without --output is refused above
        return "\n".join(f"{k}={v}" for k, v in exported.environment(str(Path(output).resolve())).items()), said
    if output:
        return f"wrote {output}; apply it with:\n  {exported.apply(str(Path(output).resolve()))}", said
    if any(UNWRITTEN in value for value in exported.environment(UNWRITTEN).values()):
        return exported.text.rstrip("\n"), [*said, "to apply it, write it to a file: add --output FILE (then the "
                                                    "lines that apply it are printed)"]
    return exported.text.rstrip("\n"), [*said, f"apply it with:\n  {exported.apply(None)}"]
