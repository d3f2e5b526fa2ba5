"""ParaView screenshots of sphyr_hpc field files, for docs/.

    xvfb-run -a -s -noreset pvpython examples/fields_screenshots.py [--data build/fields] [--docs docs]

Renders, with ParaView's own readers and filters:

* ``docs/fields_record.png``: one scored SPhyR record (baseline-random,
  full_easy, record 4): the model's completion, the dataset's ground truth
  and the yardstick optimum the completion was scored against, face-on,
  density as ink (1 black, 0 white), load cells red and support cells blue,
  masked cells inside the thin frame.
* ``docs/fields_history.png``: a SIMP history of a 40x120 cantilever (left
  edge clamped, load at mid-height of the right edge): its first written step
  (density) and its final design (strain energy density, log scale), each
  warped by its displacement, the undeformed solid cells ghosted behind.

The field files come from ``examples/fields_data.py``; if they are missing it
is run first with the project's Python (``.venv/bin/python``, else python3).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from paraview import simple as pv

ROOT = Path(__file__).resolve().parent.parent
RECORD = 4  # baseline-random/full_easy.json record 4: the one random completion that carries its load


def _args(argv):
    data, docs = ROOT / "build" / "fields", ROOT / "docs"
    for flag, value in zip(argv, argv[1:]):
        if flag == "--data":
            data = Path(value)
        elif flag == "--docs":
            docs = Path(value)
    return data.resolve(), docs.resolve()


def _ensure_data(data):
    if (data / "record" / "metrics.json").exists() and (data / "history" / "run.json").exists():
        return
    python = ROOT / ".venv" / "bin" / "python"
    python = str(python) if python.exists() else "python3"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "OMPI_", "PMIX_"))}
    subprocess.run([python, str(ROOT / "examples" / "fields_data.py"), "--out", str(data), "--record", str(RECORD)],
                   check=True, cwd=ROOT, env=env)


def _view(size):
    view = pv.CreateView("RenderView")
    view.ViewSize = size
    view.OrientationAxesVisibility = 0
    view.UseColorPaletteForBackground = 0
    view.Background = [1.0, 1.0, 1.0]
    view.CameraParallelProjection = 1
    return view


def _text(view, text, location="Upper Center", size=15):
    source = pv.Text(Text=text)
    rep = pv.Show(source, view)
    rep.WindowLocation = location
    rep.FontSize = size
    rep.Color = [0.0, 0.0, 0.0]
    return source


def _scalar_bar(lut, view, title, range_format, position, length):
    """A horizontal black-on-white colour legend for ``lut`` in ``view``."""
    bar = pv.GetScalarBar(lut, view)
    bar.Title = title
    bar.ComponentTitle = ""
    bar.TitleColor = bar.LabelColor = [0.0, 0.0, 0.0]
    bar.WindowLocation = "Any Location"
    bar.Orientation = "Horizontal"
    bar.Position = position
    bar.ScalarBarLength = length
    bar.RangeLabelFormat = range_format
    return bar


def _face_on(view, bounds, margin=1.12):
    """Camera looking down -z at the xy bounds, y up, the whole grid in view."""
    xmin, xmax, ymin, ymax = bounds
    cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
    view.CameraPosition = [cx, cy, 100.0]
    view.CameraFocalPoint = [cx, cy, 0.0]
    view.CameraViewUp = [0.0, 1.0, 0.0]
    width, height = view.ViewSize
    half_h = (ymax - ymin) / 2
    half_w = (xmax - xmin) / 2
    view.CameraParallelScale = margin * max(half_h, half_w * height / width)


def _flat(rep, colour=None):
    """No shading: a colour on screen is the colour of the value (white stays white)."""
    rep.Ambient, rep.Diffuse, rep.Specular = 1.0, 0.0, 0.0
    if colour is not None:
        rep.ColorArrayName = ["POINTS", ""]
        rep.AmbientColor = rep.DiffuseColor = colour
    return rep


def _lifted(source, dz):
    lifted = pv.Transform(Input=source)
    lifted.Transform = "Transform"
    lifted.Transform.Translate = [0.0, 0.0, dz]
    return lifted


def _markers(reader, view, value, colour):
    """Cells with ``marker == value`` drawn on top in a solid, half-transparent colour."""
    cells = pv.Threshold(Input=reader, Scalars=["CELLS", "marker"], LowerThreshold=value, UpperThreshold=value,
                         ThresholdMethod="Between")
    rep = _flat(pv.Show(_lifted(cells, 0.01), view), colour)
    rep.Opacity = 0.55
    return rep


def record_panel(data, docs):
    summary = json.loads((data / "record" / "metrics.json").read_text())
    m = summary["metrics"]
    size = [560, 620]
    titles = {
        "completion": f"completion ({summary['model']})\ntopology_score {m['topology_score']:.3f}, "
                      f"C = {m['compliance']:.4g}",
        "ground_truth": f"ground truth\nC = {m['ground_truth_compliance']:.4g}, vf = {m['ground_truth_volume_fraction']:.2f}",
        "optimum": f"yardstick optimum\nC = {m['optimal_compliance']:.4g}",
    }
    lut = pv.GetColorTransferFunction("density")
    lut.RGBPoints = [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    lut.AutomaticRescaleRangeMode = "Never"
    lut.RescaleTransferFunction(0.0, 1.0)
    views = [_view(size) for _ in range(3)]
    layout = pv.CreateLayout("record")
    layout.SplitHorizontal(0, 1.0 / 3.0)
    layout.SplitHorizontal(2, 0.5)
    for cell, view in zip((1, 5, 6), views):
        layout.AssignView(cell, view)
    layout.SetSize(3 * size[0], size[1])
    frames = []
    for name, view in zip(("completion", "ground_truth", "optimum"), views):
        reader = pv.OpenDataFile(summary["files"][name])
        rep = pv.Show(reader, view)
        pv.ColorBy(rep, ("CELLS", "density"))
        rep.LookupTable = lut
        _flat(rep)
        rep.SetRepresentationType("Surface With Edges")
        rep.EdgeColor = [0.75, 0.75, 0.75]
        _markers(reader, view, 1, [0.9, 0.1, 0.1])
        _markers(reader, view, 2, [0.1, 0.3, 0.95])
        masked = pv.Threshold(Input=reader, Scalars=["CELLS", "marker"], LowerThreshold=3, UpperThreshold=3,
                              ThresholdMethod="Between")
        frame = _flat(pv.Show(_lifted(pv.FeatureEdges(Input=pv.ExtractSurface(Input=masked)), 0.02), view),
                      [0.95, 0.6, 0.1])
        frame.LineWidth = 2.0
        _text(view, titles[name])
        reader.UpdatePipeline()
        b = reader.GetDataInformation().GetBounds()
        frames.append((b[0], b[1], b[2], b[3]))
    _text(views[0], "red: load cells (gravity down)\nblue: support cells\norange frame: masked cells",
          "Lower Left Corner", 13)
    _scalar_bar(lut, views[-1], "density", "%-#.1f", position=[0.25, 0.02], length=0.5)
    for view, frame in zip(views, frames):
        pv.Render(view)  # the first render of a view resets its camera: place it afterwards
        _face_on(view, frame, margin=1.3)
        pv.Render(view)
    out = docs / "fields_record.png"
    pv.SaveScreenshot(str(out), layout, ImageResolution=[3 * size[0], size[1]])
    return out


def history_panel(data, docs):
    run = json.loads((data / "history" / "run.json").read_text())
    reader = pv.OpenDataFile(run["file"])
    times = list(reader.TimestepValues)
    early, final = times[0], times[-1]
    reader.UpdatePipeline(final)
    b = reader.GetDataInformation().GetBounds()
    nelx = b[1] - b[0]
    peak = reader.CellData["strain_energy_density"].GetRange()[1]
    size = [1100, 480]
    views = [_view(size) for _ in range(2)]
    layout = pv.CreateLayout("history")
    layout.SplitVertical(0, 0.5)
    layout.AssignView(1, views[0])
    layout.AssignView(2, views[1])
    layout.SetSize(size[0], 2 * size[1])

    density = pv.GetColorTransferFunction("density")
    density.RGBPoints = [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    density.AutomaticRescaleRangeMode = "Never"
    density.RescaleTransferFunction(0.0, 1.0)
    energy = pv.GetColorTransferFunction("strain_energy_density")
    energy.ApplyPreset("Inferno (matplotlib)", True)
    energy.AutomaticRescaleRangeMode = "Never"
    energy.RescaleTransferFunction(peak * 1e-4, peak)
    energy.UseLogScale = 1

    def warped(t, view):
        """The design at time t warped by its displacement (largest one drawn as 6% of the length)."""
        view.ViewTime = t
        reader.UpdatePipeline(t)
        umax = reader.PointData["displacement"].GetRange(-1)[1]
        scale = 0.06 * nelx / umax if umax > 0 else 0.0
        ghost = pv.Threshold(Input=reader, Scalars=["CELLS", "density"], LowerThreshold=0.5, UpperThreshold=1.0,
                             ThresholdMethod="Between")
        _flat(pv.Show(_lifted(ghost, -0.05), view), [0.85, 0.85, 0.85])
        _flat(pv.Show(pv.Outline(Input=reader), view), [0.3, 0.3, 0.3])
        return pv.WarpByVector(Input=reader, Vectors=["POINTS", "displacement"], ScaleFactor=scale), scale

    # Top: an early step, every cell, density as ink -- the optimiser has not decided yet.
    shape, scale = warped(early, views[0])
    rep = _flat(pv.Show(shape, views[0]))
    pv.ColorBy(rep, ("CELLS", "density"))
    rep.LookupTable = density
    _text(views[0], f"iteration {int(early)} of {run['iterations']}: density, warped by the displacement "
                    f"(x {scale:.2g}); undeformed solid cells in grey")
    # Bottom: the final design, its solid cells coloured by strain energy density.
    shape, scale = warped(final, views[1])
    solid = pv.Threshold(Input=shape, Scalars=["CELLS", "density"], LowerThreshold=0.5, UpperThreshold=1.0,
                         ThresholdMethod="Between")
    rep = _flat(pv.Show(solid, views[1]))
    pv.ColorBy(rep, ("CELLS", "strain_energy_density"))
    rep.LookupTable = energy
    _text(views[1], f"final design (iteration {int(final)}, compliance {run['compliance']:.4g}): cells with "
                    f"density >= 0.5 by strain energy density, warped x {scale:.2g}")
    for lut, view, title, fmt in ((density, views[0], "density", "%-#.1f"),
                                  (energy, views[1], "strain energy density", "%-.0e")):
        bar = _scalar_bar(lut, view, title, fmt, position=[0.3, 0.03], length=0.4)
        bar.AutomaticLabelFormat = 0
        bar.LabelFormat = fmt
        if lut is energy:
            bar.UseCustomLabels = 1
            bar.CustomLabels = [10.0 ** k for k in range(-8, 3) if peak * 1e-4 < 10.0 ** k < peak]
    for view in views:
        pv.Render(view)
        _face_on(view, (b[0], b[1], b[2] - 0.12 * nelx, b[3] + 0.02 * nelx), margin=1.12)
        pv.Render(view)
    out = docs / "fields_history.png"
    pv.SaveScreenshot(str(out), layout, ImageResolution=[size[0], 2 * size[1]])
    return out


def main(argv):
    data, docs = _args(argv)
    docs.mkdir(parents=True, exist_ok=True)
    _ensure_data(data)
    a = record_panel(data, docs)
    b = history_panel(data, docs)
    print(f"wrote {a}\nwrote {b}")


if __name__ == "__main__":
    main(sys.argv[1:])
