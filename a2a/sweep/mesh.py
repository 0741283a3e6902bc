"""Process meshes and replica groups: all-to-all along chosen axes of a Cartesian mesh.

Ranks fill the mesh in row-major order, as MPI_Cart_create without reordering does: with
mesh 2x4, rank = 4*x + y. A group choice names the axes whose ranks form one replica group,
as axis letters (`z`, `y,z`; x is the first axis) or as the TPU seed's sharding strategy
(`1x1x8`: the mesh size on axes in the group, 1 elsewhere). Every group runs at once.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from typing import Any

from a2a.errors import BadConfig, BadOption

AXES = "xyzw"


@dataclass(frozen=True)
class Layout:
    """A mesh shape and the axes that form each replica group."""

    mesh: tuple[int, ...]
    keep: tuple[bool, ...]

    @property
    def nprocs(self) -> int:
        """Ranks the mesh holds."""
        return math.prod(self.mesh)

    @property
    def group_size(self) -> int:
        """Ranks in each replica group."""
        return math.prod(d for d, k in zip(self.mesh, self.keep) if k)

    @property
    def ngroups(self) -> int:
        """Replica groups that run at once."""
        return self.nprocs // self.group_size

    @property
    def mesh_text(self) -> str:
        """'2x2x8'."""
        return "x".join(map(str, self.mesh))

    @property
    def strategy(self) -> str:
        """The sharding strategy that names the groups: '1x1x8'."""
        return "x".join(str(d if k else 1) for d, k in zip(self.mesh, self.keep))

    def groups(self) -> list[list[int]]:
        """Member ranks of every group, in rank order within each, groups by lowest rank."""
        strides = [math.prod(self.mesh[i + 1:]) for i in range(len(self.mesh))]
        fixed = [range(d) if not k else range(1) for d, k in zip(self.mesh, self.keep)]
        moving = [range(d) if k else range(1) for d, k in zip(self.mesh, self.keep)]
        rank = lambda coords: sum(c * s for c, s in zip(coords, strides))  # noqa: E731
        return [sorted(rank([a + b for a, b in zip(base, offset)]) for offset in itertools.product(*moving))
                for base in itertools.product(*fixed)]


def parse_mesh(text: str) -> tuple[int, ...]:
    """'2x2x8' -> (2, 2, 8)."""
    if not re.fullmatch(r"\s*\d+(\s*x\s*\d+)*\s*", str(text)) or "0" in re.split(r"\s*x\s*", text.strip()):
        raise BadOption(f"mesh {text!r}; accepted: sizes >= 1 joined by x, e.g. 8, 2x4, 2x2x8")
    return tuple(int(d) for d in text.split("x"))


def parse_groups(text: str, mesh: tuple[int, ...]) -> tuple[bool, ...]:
    """'y,z' or '1x1x8' -> which axes of `mesh` form a group."""
    names = AXES[: len(mesh)] if len(mesh) <= len(AXES) else ""
    text = str(text).strip()
    if re.fullmatch(r"\d+(x\d+)*", text):
        sizes = tuple(int(s) for s in text.split("x"))
        if len(sizes) != len(mesh) or any(s not in (1, d) for s, d in zip(sizes, mesh)):
            raise BadOption(f"groups {text!r} do not fit mesh {'x'.join(map(str, mesh))}; accepted: one "
                            "entry per axis, the axis size (in the group) or 1 (not)")
        return tuple(s == d > 1 for s, d in zip(sizes, mesh))
    axes = [a.strip() for a in text.split(",") if a.strip()]
    if not axes or any(a not in names for a in axes) or len(set(axes)) != len(axes):
        example = "x".join(["1"] * (len(mesh) - 1) + [str(mesh[-1])])
        raise BadOption(f"groups {text!r} for mesh {'x'.join(map(str, mesh))}; accepted: axis names among "
                        f"{', '.join(names) or 'none'} (x is the first axis), or a sharding strategy like {example}")
    return tuple(name in axes for name in names)


def mesh_layouts(meshes: str, group_choices: list[str]) -> list[Layout]:
    """--mesh (comma-separated) and --groups -> every mesh with every group choice (all axes when none)."""
    texts = [m.strip() for m in meshes.split(",") if m.strip()]
    if group_choices and not texts:
        raise BadConfig("--groups needs --mesh (the axes are the mesh's)")
    return layouts(texts, group_choices)


def layouts(meshes: list[str], group_choices: list[str]) -> list[Layout]:
    """Every mesh with every group choice (all axes when none is given)."""
    chosen = []
    for text in meshes:
        mesh = parse_mesh(text)
        for keep in [parse_groups(g, mesh) for g in group_choices] or [(True,) * len(mesh)]:
            layout = Layout(mesh, keep)
            if layout not in chosen:
                chosen.append(layout)
    return chosen


def group_comm(comm: Any, layout: Layout) -> Any:
    """This rank's replica-group communicator: Cart_sub of a periodic Cartesian mesh (collective)."""
    cart = comm.Create_cart(list(layout.mesh), periods=[True] * len(layout.mesh), reorder=False)
    group = cart.Sub(list(layout.keep))
    cart.Free()
    return group
