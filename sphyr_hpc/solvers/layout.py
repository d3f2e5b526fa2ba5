"""How a load case's grid is laid out over the ranks: the nodal and element DMDAs, slabs, local DOFs.

Conventions (see :mod:`sphyr_hpc.solvers.elasticity`): the nodal DMDA's first
axis is the grid column (x), its second the grid row (y, down), dof 2, so
PETSc's natural ordering is the natural DOF numbering of
:mod:`sphyr_hpc.core.loadcase`; the element DMDA's ownership matches the
elements ``DMDAGetElements`` hands each rank, and each rank's box of elements,
row-major, is its *slab*.
"""

import numpy as np

from ..core import discretisation as fe


class PartitionError(ValueError):
    """A grid too small to give every rank a part of it."""


def node_dmda(PETSc, shape, comm, prefix):
    """The nodal DMDA of a grid of cells ``shape`` (slowest axis first; dof 2, box stencil 1, Q1
    elements, unit cells), options under ``prefix``."""
    if fe.grid_dimension(shape) != 2:
        raise fe.not_in_3d("the grid's DMDA layout")
    nely, nelx = shape
    da = PETSc.DMDA().create(
        dim=2, dof=2, sizes=(nelx + 1, nely + 1), stencil_width=1,
        stencil_type=PETSc.DMDA.StencilType.BOX, comm=comm, setup=False,
    )
    da.setOptionsPrefix(prefix)
    da.setFromOptions()
    try:
        da.setUp()
    except PETSc.Error:
        da.destroy()
        raise PartitionError(f"grid {nely}x{nelx} ({nely + 1}x{nelx + 1} nodes) is too small for "
                             f"{comm.getSize()} ranks") from None
    da.setElementType(PETSc.DMDA.ElementType.Q1)
    da.setUniformCoordinates(0.0, float(nelx), 0.0, float(nely))
    return da


class ElementLayout:
    """This rank's elements and DOFs on the nodal DMDA ``da``.

    ``da_elem`` (the element DMDA, stencil width ``halo``, owned by whoever
    owns it next: the system), ``slab``/``slab_shape``, ``local_edofs``
    (ghosted local DOFs of each slab element, (n, 8)), ``n_local_dofs``,
    ``local_natural_dofs`` (natural number of every ghosted local DOF) and
    ``owned_local_dofs`` (the local DOFs this rank owns, in the DMDA's order).
    """

    def __init__(self, PETSc, da, shape, comm, halo):
        nely, nelx = shape
        lx, ly = (list(r) for r in da.getOwnershipRanges())
        # DMDAGetElements gives element i to the rank owning node i+1 along each axis,
        # so the first rank of each direction holds one element fewer than nodes.
        lx[0] -= 1
        ly[0] -= 1
        if min(lx) < 1 or min(ly) < 1:
            raise PartitionError(f"grid {nely}x{nelx} is too small for {comm.getSize()} ranks: "
                                 f"a rank would own no element")
        self.da_elem = PETSc.DMDA().create(
            dim=2, dof=1, sizes=(nelx, nely), proc_sizes=da.getProcSizes(),
            ownership_ranges=(lx, ly), stencil_width=max(1, halo),
            stencil_type=PETSc.DMDA.StencilType.BOX, comm=comm,
        )
        (xs, xe), (ys, ye) = self.da_elem.getRanges()
        self.slab = (slice(ys, ye), slice(xs, xe))
        self.slab_shape = (ye - ys, xe - xs)

        nodes = np.asarray(da.getElements(), dtype=np.int64).reshape(-1, 4)
        (gxs, gxe), (gys, gye) = da.getGhostRanges()
        gxm = gxe - gxs
        rows = gys + nodes[:, 0] // gxm
        cols = gxs + nodes[:, 0] % gxm
        want_r, want_c = np.meshgrid(np.arange(ys, ye), np.arange(xs, xe), indexing="ij")
        if rows.size != want_r.size or np.any(rows != want_r.ravel()) or np.any(cols != want_c.ravel()):
            raise RuntimeError("DMDAGetElements does not match the element DMDA ownership")
        self.n_local_dofs = 2 * gxm * (gye - gys)
        # Ghosted local DOF numbers, (n_local_elem, 8); int32 halves the largest index array.
        index_type = np.int32 if self.n_local_dofs < 2**31 else np.int64
        self.local_edofs = fe.nodes_to_dofs(nodes).astype(index_type)

        # Natural DOF number of every ghosted local DOF.
        gr, gc = np.meshgrid(np.arange(gys, gye), np.arange(gxs, gxe), indexing="ij")
        local_nodes = (gr * (nelx + 1) + gc).ravel()
        self.local_natural_dofs = np.empty(self.n_local_dofs, dtype=np.int64)
        self.local_natural_dofs[0::2] = 2 * local_nodes
        self.local_natural_dofs[1::2] = 2 * local_nodes + 1
        (oxs, oxe), (oys, oye) = da.getRanges()
        owned = (gr >= oys) & (gr < oye) & (gc >= oxs) & (gc < oxe)
        self.owned_local_dofs = np.repeat(np.flatnonzero(owned.ravel()) * 2, 2) + np.tile([0, 1], int(owned.sum()))


class SlabFields:
    """Element fields between natural (nely, nelx) arrays and this rank's slab, for a system with
    ``loadcase``, ``comm``, ``slab`` and ``slab_shape``."""

    def slab_of(self, natural):
        """This rank's slab (row-major, flattened) of a natural (nely, nelx) element array."""
        return np.ascontiguousarray(np.asarray(natural, dtype=float).reshape(self.loadcase.shape)[self.slab]).ravel()

    def gather(self, slab, root=None):
        """Natural (nely, nelx) array of an element field, on every rank (or only on ``root``: None elsewhere)."""
        if self.comm.getSize() == 1:  # the slab is the whole grid
            return np.array(slab).reshape(self.loadcase.shape)
        mpi = self.comm.tompi4py()
        piece = (self.slab, np.asarray(slab).reshape(self.slab_shape))
        pieces = mpi.allgather(piece) if root is None else mpi.gather(piece, root=root)
        if pieces is None:
            return None
        out = np.empty(self.loadcase.shape, dtype=np.asarray(slab).dtype)
        for where, piece in pieces:
            out[where] = piece
        return out
