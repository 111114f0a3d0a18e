"""The application hosted on Ray Serve: ``build_app`` (:mod:`.builder`), the Ingress deployment,
the colocated and split layouts, the composition root (:mod:`.graph`), replica health and the
sharded Retriever. The only part of the server that imports Ray.
"""
