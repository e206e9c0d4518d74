"""beamtok's implementation. Nothing under ``beamtok._src`` is public: its modules move and
change between releases without notice. The public names are those of ``beamtok`` and of its
namespaces ``beamtok.training``, ``beamtok.cache``, ``beamtok.beam``, ``beamtok.extend`` and
``beamtok.testing`` (docs/api.md lists them; tests/project/public_api.json holds them).
"""
