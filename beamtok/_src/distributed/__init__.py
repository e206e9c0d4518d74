"""beamtok inside distributed training jobs: a torch ``Stateful`` loader saved in the job's DCP
checkpoint (``beamtok._src.distributed.torch_loader``) and an Orbax handler for JAX jobs
(``beamtok._src.distributed.orbax_state``). Both store the states of every rank of the run, so a
restart on any number of processes resumes with nothing lost or repeated."""
