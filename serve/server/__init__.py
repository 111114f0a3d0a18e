"""The server: the application behind steadyrank's HTTP API (docs/ARCHITECTURE.md, "Layers").

Its parts, lowest first: the components' calls and answers (``calls``), admission and priorities,
the shadow evaluator (``quality``), the components (``components``), the HTTP edge (``http``:
no Ray import) and the hosting on Ray Serve (``hosting``: the only part that knows Ray).
"""
