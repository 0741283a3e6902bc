"""Plug-ins: algorithms registered by a .py file or a module the caller names (entry points load themselves)."""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import CodeType

from a2a.algos.registry import REGISTRY
from a2a.errors import PluginError

FILE_MODULES = "a2a_plugin_"  # the prefix of the module a plug-in file is imported as


def load_plugin(source: str | Path) -> list[str]:
    """Import a plug-in from a .py file or a module name; return the names it registered."""
    before = set(REGISTRY.all())
    path = Path(source)
    with REGISTRY.undone_on_error():
        try:
            if path.suffix == ".py" or path.exists():
                _import_file(path, str(source))
            else:
                importlib.import_module(str(source))
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"cannot load plug-in {source}: {type(exc).__name__}: {exc}") from exc
    return sorted(set(REGISTRY.all()) - before)


def _import_file(path: Path, source: str) -> None:
    """Import a plug-in file once; a failed import leaves no module behind, so a retry fails again."""
    if not path.is_file():
        raise PluginError(f"plug-in file {source} does not exist")
    name = f"{FILE_MODULES}{path.stem}_{abs(hash(str(path.resolve())))}"
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, path, loader=FromSource(name, str(path)))
    if spec is None or spec.loader is None:  # never, with a loader given
        raise PluginError(f"cannot load plug-in {source}: no module spec for it")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


class FromSource(importlib.machinery.SourceFileLoader):
    """A plug-in file's loader that compiles its source every time and keeps no bytecode: a .pyc is trusted by the
    source's size and mtime in whole seconds, so an edit of the same length within a second would run the old code
    (and the schedule cache keys an algorithm by the source it ran)."""

    def get_code(self, fullname: str) -> CodeType:
        return self.source_to_code(self.get_data(self.path), self.path)
