"""Starting Beam's local worker processes: the worker server a multi-process build starts
before Beam is imported (``worker_server``), which forks each worker from a process that
imported Beam once (``beamtok.beam.fork_server``). It lives beside ``beamtok.beam``, in
Beam's layer, because importing that package imports Beam, and the server must start first.
"""
