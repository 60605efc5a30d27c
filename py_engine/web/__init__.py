"""What only the browser worker needs: the protocol handler (worker.py) and its state (state.py),
the model source served by our origin (files.py), WebKit's policy (webkit.py) and submit probe
(submit_probe.py), the device checks (checks.py), a chat's pictures as the browser decodes them
(pictures.py). The device seam itself is py_engine/gpu/; this package sits above the engine and
imports from it, never the other way."""
