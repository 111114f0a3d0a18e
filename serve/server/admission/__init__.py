"""Admission and backpressure: what a request is let in to, and when it is refused instead, in one
place (docs/design/0008-admission.md). One module per job:

- :mod:`~serve.server.admission.gate`: one ingress replica's admission state (:class:`Gate`:
  in-flight slots, draining, each model's :class:`WorkQueue`, the :class:`RefusalPacer`) and what
  a request is admitted as (:class:`Work`);
- :mod:`~serve.server.admission.early`: the refusal before a request's body is read;
- :mod:`~serve.server.admission.work_queue`: work-based admission, the predicted wait of a model's
  queued work;
- :mod:`~serve.server.admission.pacing`: the pacing of overload refusals;
- :mod:`~serve.server.admission.deadline`: the deadline drops inside a model replica (:class:`Ticket`);
- :mod:`~serve.server.admission.shadow`: shadow work after user work inside a model replica
  (:class:`ShadowGate`).

Its settings are the ``admission`` section (:mod:`serve.settings.admission`). No Ray, no HTTP: the
HTTP edge (:mod:`serve.server.http.deps`, :meth:`~serve.server.http.gateway.Gateway.model_call`)
and the components call it.
"""
