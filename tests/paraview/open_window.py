"""Open ParaView's first render window and render into it; print ``WINDOW OPEN`` once it has.

    xvfb-run -a -s -noreset pvpython tests/paraview/open_window.py

What examples/fields_screenshots.py and inspect_fields.py do first, alone: benchmarks/paraview_window.py
starts it many times to show whether pvpython's first window opens every time.
"""

from paraview import simple

view = simple.CreateView("RenderView")
view.ViewSize = [64, 48]
simple.Show(simple.Sphere(), view)
simple.Render(view)
print("WINDOW OPEN", flush=True)
