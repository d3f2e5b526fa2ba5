"""Open field files with ParaView's own readers and print what ParaView sees, as JSON.

Run with ParaView's Python (Debian's ``paraview`` package), off screen::

    xvfb-run -a -s -noreset pvpython tests/paraview/inspect_fields.py FILE [FILE ...] [--values]

Each FILE (.xdmf, .vtu, .pvd) is opened with ``OpenDataFile`` -- the reader
ParaView's GUI picks -- and updated at its last time step.  Printed, one JSON
object on the line starting with ``INSPECT``: for every file its reader, number
of cells and points, bounds, time steps, and per cell/point/field array its
number of components and range; with ``--values`` also every cell's centre and
every array's values (small grids only), so a test can check the orientation.
Uses nothing from sphyr_hpc: it is ParaView's view of the files.
"""

import json
import os
import sys

from paraview import servermanager as sm
from paraview import simple
from vtkmodules.util.numpy_support import vtk_to_numpy


def _leaf(data):
    """The first dataset of a composite (the XDMF reader may wrap one grid in a multiblock)."""
    if data.IsA("vtkCompositeDataSet"):
        it = data.NewIterator()
        it.InitTraversal()
        return it.GetCurrentDataObject() if not it.IsDoneWithTraversal() else None
    return data


def _arrays(field_data, with_values):
    out = {}
    for i in range(field_data.GetNumberOfArrays()):
        arr = field_data.GetAbstractArray(i)
        if arr is None or not arr.IsA("vtkDataArray"):
            continue
        values = vtk_to_numpy(arr)
        entry = {
            "components": arr.GetNumberOfComponents(),
            "tuples": arr.GetNumberOfTuples(),
            "type": arr.GetDataTypeAsString(),
            "range": [float(values.min()), float(values.max())] if values.size else None,
        }
        if arr.GetNumberOfComponents() > 1:
            entry["component_ranges"] = [list(arr.GetRange(c)) for c in range(arr.GetNumberOfComponents())]
        if with_values:
            entry["values"] = values.tolist()
        out[arr.GetName()] = entry
    return out


def inspect(path, with_values):
    reader = simple.OpenDataFile(os.path.abspath(path))
    if reader is None:
        return {"error": "ParaView found no reader"}
    times = [float(t) for t in getattr(reader, "TimestepValues", []) or []]
    if times:
        reader.UpdatePipeline(times[-1])
    else:
        reader.UpdatePipeline()
    data = _leaf(sm.Fetch(reader))
    info = {
        "reader": reader.GetXMLName(),
        "dataset": data.GetClassName(),
        "cells": data.GetNumberOfCells(),
        "points": data.GetNumberOfPoints(),
        "bounds": list(data.GetBounds()),
        "times": times,
        "cell_data": _arrays(data.GetCellData(), with_values),
        "point_data": _arrays(data.GetPointData(), with_values),
        "field_data": _arrays(data.GetFieldData(), True),
    }
    if with_values:
        centres = []
        bounds = [0.0] * 6
        for c in range(data.GetNumberOfCells()):
            data.GetCellBounds(c, bounds)
            centres.append([(bounds[0] + bounds[1]) / 2, (bounds[2] + bounds[3]) / 2])
        info["cell_centres"] = centres
        info["point_coordinates"] = [list(data.GetPoint(p))[:2] for p in range(data.GetNumberOfPoints())]
    simple.Delete(reader)
    return info


def main(argv):
    with_values = "--values" in argv
    paths = [a for a in argv if a != "--values"]
    result = {}
    for path in paths:
        try:
            result[path] = inspect(path, with_values)
        except Exception as err:  # reported as data for the test to show
            result[path] = {"error": f"{type(err).__name__}: {err}"}
    print("INSPECT " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
