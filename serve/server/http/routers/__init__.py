"""One router per API family: :mod:`.native` (``/v1/rerank``, ``/v1/search``, ``/v1/embeddings``,
``/v1/models``), :mod:`.cohere` (``/v2/rerank``), :mod:`.tei` (``/rerank``, ``/embed``),
:mod:`.infinity` (Infinity bodies on ``/rerank``), :mod:`.health` (``/healthz``, ``/readyz``,
``/metrics``), :mod:`.quality` (``/v1/canary``, ``/v1/quality``)."""
