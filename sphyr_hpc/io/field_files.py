"""Files for field output: HDF5 heavy data with an XDMF 3 index, or VTU via meshio.

This module only moves arrays into files; :mod:`sphyr_hpc.io.fields` computes
them and states the conventions (frame, orientation, units).  What it receives
is a :class:`Piece`: one rank's box of cells and box of nodes of the
structured grid, in *grid orientation* (row 0 at the top), plus scalars.

Layout of the heavy data
------------------------
Arrays are written in ParaView's y-up order: the rows of the printed grid
reversed, so ``dataset[j, i]`` is the cell (or node) at x = i, y = j above the
bottom-left corner at the origin.  Two layouts, one memory order:

* ``"xdmf"``: 2D datasets, cells ``(nely, nelx)``, node scalars
  ``(nely+1, nelx+1)``, node vectors ``(nely+1, nelx+1, 3)``; the XDMF index
  declares a structured ``3DCoRectMesh`` of 1 x (nely+1) x (nelx+1) nodes
  with ``ORIGIN_DXDYDZ`` geometry (origin 0, spacing 1: square unit cells in
  the plane z = 0).  Not a ``2DCoRectMesh``/``ORIGIN_DXDY``: ParaView 5.11's
  XDMF readers (both) read XDMF's two axes as z and y and draw such a grid in
  the YZ plane, sideways to the (x, y, 0) displacement.  Read by ParaView's
  XDMF 3 reader (its default for ``.xdmf``; give it an absolute path, it
  resolves the ``.h5`` wrongly for a bare file name).  meshio cannot read
  structured XDMF meshes.
* ``"xdmf-quad"``: the same values flattened (cells ``(nely*nelx,)``, node
  vectors ``(n_nodes, 3)``), with explicit ``/mesh/points`` (XYZ, z = 0) and
  ``/mesh/cells`` (Quadrilateral, counter-clockwise): bigger, but readable by
  every XDMF reader, meshio's included.
* ``"vtu"``: meshio's VTU writer (an unstructured quad mesh); a history is a
  ``.pvd`` collection of one ``.vtu`` per step.

Parallel writing
----------------
On a communicator of more than one rank with an MPI build of h5py (Debian's
``python3-h5py-mpi`` is selected when run under ``mpirun``), the file is
opened with ``driver="mpio"``: datasets are created collectively and every
rank writes its own boxes (independent I/O), so the file is the same for any
number of ranks.  Without MPI h5py, and always for VTU, the pieces are
gathered to rank 0, which writes alone.  Only rank 0 writes index files, each
atomically (temporary file in the same folder, then ``os.replace``), and only
after the heavy data it names has been flushed.
"""

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .atomic import atomic_path, write_text_atomic

FORMATS = ("xdmf", "xdmf-quad", "vtu")
_XDMF_TYPES = {np.dtype(np.float64): ("Float", "8"), np.dtype(np.int8): ("Char", "1"),
               np.dtype(np.int64): ("Int", "8"), np.dtype(np.int32): ("Int", "4")}


def check_format(fields_format):
    if fields_format not in FORMATS:
        raise ValueError(f"unknown fields format {fields_format!r}: expected one of {', '.join(FORMATS)}")
    return fields_format


def index_suffix(fields_format, history=False):
    """Suffix of the file a viewer opens: .xdmf, .vtu, or .pvd for a VTU history."""
    if fields_format == "vtu":
        return ".pvd" if history else ".vtu"
    return ".xdmf"


@dataclass
class Piece:
    """One rank's part of a design: boxes in grid orientation (row 0 at the top).

    ``cell_box``/``node_box`` are ``(row_start, row_stop, col_start, col_stop)``
    in cells and in nodes; ``cells``/``nodes`` map array names to arrays of the
    box's shape (node vectors with a trailing axis of 3); ``scalars`` are the
    same on every rank.
    """

    shape: tuple
    cell_box: tuple
    node_box: tuple
    cells: dict
    nodes: dict
    scalars: dict = field(default_factory=dict)


def _assemble(pieces):
    """One piece covering the whole grid from pieces that tile it."""
    first = pieces[0]
    nely, nelx = first.shape
    cells = {k: np.empty((nely, nelx) + v.shape[2:], v.dtype) for k, v in first.cells.items()}
    nodes = {k: np.empty((nely + 1, nelx + 1) + v.shape[2:], v.dtype) for k, v in first.nodes.items()}
    for p in pieces:
        r0, r1, c0, c1 = p.cell_box
        for k, v in p.cells.items():
            cells[k][r0:r1, c0:c1] = v
        r0, r1, c0, c1 = p.node_box
        for k, v in p.nodes.items():
            nodes[k][r0:r1, c0:c1] = v
    return Piece(first.shape, (0, nely, 0, nelx), (0, nely + 1, 0, nelx + 1), cells, nodes, dict(first.scalars))


def quad_mesh(shape):
    """Points (n_nodes, 3) and counter-clockwise quads (n_cells, 4) in the y-up file order."""
    nely, nelx = shape
    j, i = np.meshgrid(np.arange(nely + 1, dtype=float), np.arange(nelx + 1, dtype=float), indexing="ij")
    points = np.stack([i.ravel(), j.ravel(), np.zeros(i.size)], axis=1)
    jc, ic = np.meshgrid(np.arange(nely), np.arange(nelx), indexing="ij")
    k = (jc * (nelx + 1) + ic).ravel().astype(np.int64)
    cells = np.stack([k, k + 1, k + nelx + 2, k + nelx + 1], axis=1)
    return points, cells


def y_up(array):
    """A natural grid-oriented (rows top to bottom) array in file order (rows bottom to top)."""
    return np.ascontiguousarray(np.asarray(array)[::-1])


def _h5py_has_mpi():
    import h5py

    return bool(h5py.get_config().mpi)


# -- HDF5 -------------------------------------------------------------------------------------------
class H5Sink:
    """An HDF5 file receiving pieces of designs, collective on ``comm`` (mpi4py)."""

    def __init__(self, path, comm, shape, flat, attrs=None, keep=None):
        """A new file at ``path``; with ``keep`` (group names), the existing file with only those
        of its ``step_*`` groups (a resumed history)."""
        import h5py

        self.path = Path(path)
        self.comm = comm
        self.shape = tuple(shape)
        self.flat = flat
        self.rank = comm.rank if comm is not None else 0
        size = comm.size if comm is not None else 1
        self.mode = "serial" if size == 1 else ("mpio" if _h5py_has_mpi() else "gather")
        self.file = None
        mode = "a" if keep is not None and self.path.exists() else "w"
        if self.mode == "mpio":
            self.file = h5py.File(self.path, mode, driver="mpio", comm=comm)
        elif self.rank == 0:
            self.file = h5py.File(self.path, mode)
        if self.file is not None and mode == "a":
            for name in sorted(set(self.file) - set(keep)):
                if name.startswith("step_"):
                    del self.file[name]
        if self.file is not None:
            self.file.attrs["nely"], self.file.attrs["nelx"] = self.shape
            for key, value in (attrs or {}).items():
                self.file.attrs[key] = value
            if flat and mode == "w":
                self._write_mesh()

    @property
    def writes(self):
        """Whether this rank holds the file (every rank with mpio, rank 0 otherwise)."""
        return self.file is not None

    def _write_mesh(self):
        points, cells = quad_mesh(self.shape)
        group = self.file.require_group("mesh")
        dp = group.create_dataset("points", points.shape, points.dtype)
        dc = group.create_dataset("cells", cells.shape, cells.dtype)
        if self.rank == 0:
            dp[...] = points
            dc[...] = cells

    def _dataset_shape(self, kind, sample):
        nely, nelx = self.shape
        rows, cols = (nely, nelx) if kind == "cell" else (nely + 1, nelx + 1)
        tail = sample.shape[2:]
        return ((rows * cols,) if self.flat else (rows, cols)) + tail

    def _put(self, dset, kind, box, values):
        """Write a grid-oriented box into a y-up dataset."""
        nely, nelx = self.shape
        rows, cols = (nely, nelx) if kind == "cell" else (nely + 1, nelx + 1)
        r0, r1, c0, c1 = box
        j0, j1 = rows - r1, rows - r0  # grid rows [r0, r1) are file rows [rows - r1, rows - r0)
        values = np.ascontiguousarray(values[::-1])
        if not self.flat:
            dset[j0:j1, c0:c1] = values
        elif c0 == 0 and c1 == cols:
            dset[j0 * cols:j1 * cols] = values.reshape((-1,) + values.shape[2:])
        else:
            for n, j in enumerate(range(j0, j1)):
                dset[j * cols + c0:j * cols + c1] = values[n]

    def write(self, group_name, piece):
        """Write a piece under ``/group_name`` (``""`` for the root); collective."""
        if self.mode == "gather":
            pieces = self.comm.gather(piece, root=0)
            if self.rank != 0:
                return
            piece = _assemble(pieces)
        group = self.file.require_group(group_name) if group_name else self.file
        for kind, arrays, box in (("cell", piece.cells, piece.cell_box), ("node", piece.nodes, piece.node_box)):
            for name, values in arrays.items():
                if name in group:
                    dset = group[name]
                else:
                    dset = group.create_dataset(name, self._dataset_shape(kind, values), values.dtype)
                self._put(dset, kind, box, values)
        for name, value in piece.scalars.items():
            value = np.nan if value is None else value
            group.attrs[name] = value
            if name in group:
                dset = group[name]
            else:
                dset = group.create_dataset(name, (1,), np.float64)
            if self.rank == 0:
                dset[0] = value

    def flush(self):
        if self.file is not None:
            self.file.flush()

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None


# -- XDMF index -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FieldSpec:
    """Names, centres and shapes of the arrays of one piece, for the index."""

    cells: tuple   # ((name, dtype, n_components), ...)
    nodes: tuple
    scalars: tuple

    @classmethod
    def of(cls, piece):
        def spec(arrays):
            return tuple((k, np.dtype(v.dtype), (v.shape[2] if v.ndim == 3 else 1)) for k, v in arrays.items())

        return cls(spec(piece.cells), spec(piece.nodes), tuple(piece.scalars))


def _data_item(parent, dims, dtype, h5_name, h5_path):
    number_type, precision = _XDMF_TYPES[np.dtype(dtype)]
    item = ET.SubElement(parent, "DataItem", Format="HDF", Dimensions=" ".join(map(str, dims)),
                         DataType=number_type, Precision=precision)
    item.text = f"{h5_name}:{h5_path}"
    return item


def xdmf_grid(name, shape, spec, h5_name, group, flat, time=None, level=2):
    """A Uniform grid with the design's attributes, serialised at indentation ``level``
    (``group``: HDF5 group of the arrays, "" for the root)."""
    nely, nelx = shape
    prefix = f"/{group}" if group else ""
    grid = ET.Element("Grid", Name=name, GridType="Uniform")
    if time is not None:
        ET.SubElement(grid, "Time", Value=repr(float(time)))
    n_cells, n_nodes = nely * nelx, (nely + 1) * (nelx + 1)
    if flat:
        topo = ET.SubElement(grid, "Topology", TopologyType="Quadrilateral", NumberOfElements=str(n_cells))
        _data_item(topo, (n_cells, 4), np.int64, h5_name, "/mesh/cells")
        geo = ET.SubElement(grid, "Geometry", GeometryType="XYZ")
        _data_item(geo, (n_nodes, 3), np.float64, h5_name, "/mesh/points")
    else:
        # Dimensions are slowest axis first: z (one layer of nodes), y (rows), x (columns).
        # Not a 2DCoRectMesh: ParaView's XDMF readers map its two axes to z and y, i.e.
        # into the YZ plane, where the (x, y, 0) displacement would not match the geometry.
        ET.SubElement(grid, "Topology", TopologyType="3DCoRectMesh", Dimensions=f"1 {nely + 1} {nelx + 1}")
        geo = ET.SubElement(grid, "Geometry", GeometryType="ORIGIN_DXDYDZ")
        for text in ("0 0 0", "1 1 1"):
            item = ET.SubElement(geo, "DataItem", Format="XML", Dimensions="3", DataType="Float", Precision="8")
            item.text = text
    for center, arrays, rows, cols in (("Cell", spec.cells, nely, nelx), ("Node", spec.nodes, nely + 1, nelx + 1)):
        for array_name, dtype, ncomp in arrays:
            dims = (rows * cols,) if flat else (rows, cols)
            if ncomp > 1:
                dims = dims + (ncomp,)
            attr = ET.SubElement(grid, "Attribute", Name=array_name, Center=center,
                                 AttributeType="Vector" if ncomp == 3 else "Scalar")
            _data_item(attr, dims, dtype, h5_name, f"{prefix}/{array_name}")
    if not flat:
        # Grid-centred scalars become ParaView field data; meshio rejects them, so the
        # quad layout (meant for meshio and other readers) leaves them to the HDF5 attributes.
        for scalar in spec.scalars:
            attr = ET.SubElement(grid, "Attribute", Name=scalar, Center="Grid", AttributeType="Scalar")
            _data_item(attr, (1,), np.float64, h5_name, f"{prefix}/{scalar}")
    ET.indent(grid, space=" ", level=level)
    return " " * level + ET.tostring(grid, encoding="unicode").rstrip() + "\n"


def xdmf_document(grids, collection=None):
    """An XDMF 3 document of serialised grids, in a temporal collection named ``collection``
    if given.  Steps are serialised once and joined here, so rewriting a long history's
    index costs a string join, not a new XML tree."""
    head = '<?xml version="1.0" encoding="utf-8"?>\n<Xdmf Version="3.0">\n <Domain>\n'
    tail = " </Domain>\n</Xdmf>\n"
    if collection is not None:
        from xml.sax.saxutils import quoteattr  # here: it imports urllib, 35 ms every score start

        head += f'  <Grid Name={quoteattr(collection)} GridType="Collection" CollectionType="Temporal">\n'
        tail = "  </Grid>\n" + tail
    return head + "".join(grids) + tail


def write_xdmf_index(path, grids, collection=None):
    write_text_atomic(path, xdmf_document(grids, collection), fsync=False)


# -- VTU --------------------------------------------------------------------------------------------
def write_vtu(path, piece):
    """A whole-grid piece as a VTU quad mesh (meshio), arrays in the y-up file order."""
    import meshio

    points, cells = quad_mesh(piece.shape)
    point_data = {k: y_up(v).reshape((points.shape[0],) + v.shape[2:]) for k, v in piece.nodes.items()}
    cell_data = {k: [y_up(v).reshape((cells.shape[0],) + v.shape[2:])] for k, v in piece.cells.items()}
    field_data = {k: np.array([np.nan if v is None else v], dtype=float) for k, v in piece.scalars.items()}
    with atomic_path(path, suffix=".vtu") as tmp:
        meshio.write_points_cells(tmp, points, [("quad", cells)], point_data=point_data, cell_data=cell_data,
                                  field_data=field_data, file_format="vtu")


def write_pvd_index(path, entries):
    """A ParaView collection: ``entries`` are (time, file name relative to the index)."""
    root = ET.Element("VTKFile", type="Collection", version="0.1")
    coll = ET.SubElement(root, "Collection")
    for time, name in entries:
        ET.SubElement(coll, "DataSet", timestep=repr(float(time)), part="0", file=name)
    ET.indent(root, space=" ")
    write_text_atomic(path, '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n", fsync=False)
