# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv. `make demo` installs only what the demo runs (beamtok with Beam and
# matplotlib); `make test` (make setup) installs torch==2.13.0 first (a CPU wheel that lies on
# disk here; any other torch request may pull a multi-GB CUDA build), then every extra.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.beamtok-installed
KERNELS_STAMP := $(VENV)/.beamtok-kernels

.PHONY: setup demo test test-fast lint typecheck unit docs floor bench soak device-check clean

setup: $(STAMP) $(KERNELS_STAMP)

# what the demo runs, alone: the Beam build, the stats plot; no torch, test or trainer packages
# (make setup, and so make test, installs the rest into the same .venv)
DEMO_STAMP := $(VENV)/.beamtok-demo
$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[beam,plot]'
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[all,dev]'
	# the tests write MDS shards with MosaicML Streaming's own writer; its pins conflict with
	# numpy 2.4 and transformers 5, so it comes without dependencies (its writer's are in dev)
	$(BIN)/pip install --quiet --no-deps mosaicml-streaming==0.13.0
	# torchtitan's checkpoint manager and dataloader classes for tests/distributed/test_torchtitan.py;
	# its datasets<4.8 pin conflicts with datasets 5, and the modules the tests import need only
	# torch, torchdata, tyro and spmd_types (in dev)
	$(BIN)/pip install --quiet --no-deps torchtitan==0.3.0
	touch $(STAMP)

# the compiled engines' numba kernels, compiled and cached once (again when an engine changes)
# rather than by each test process, Beam worker and rank that first builds one
$(KERNELS_STAMP): $(STAMP) $(wildcard beamtok/_src/engines/*.py)
	$(BIN)/python -m beamtok._src.engines.kernel_warmup
	touch $(KERNELS_STAMP)

DEMO_INPUTS := 'data/corpus/shakespeare-{00..03}.jsonl' 'data/corpus/shakespeare-*.jsonl.gz' 'data/corpus/pydocs-*.jsonl.zst'

demo: $(DEMO_STAMP)
	$(BIN)/beamtok demo
	$(BIN)/beamtok cache $(DEMO_INPUTS) --output build/demo-cache --tokenizer data/tokenizers/gpt2 --seq-len 1024
	$(BIN)/beamtok head build/demo-cache
	$(BIN)/beamtok stats build/demo-cache --plot build/demo-stats.png
	$(BIN)/beamtok verify build/demo-cache

lint: setup
	$(BIN)/ruff check beamtok pipelines tests benchmarks examples floor docs/hooks
	$(BIN)/ruff format --check beamtok pipelines tests benchmarks examples floor docs/hooks

typecheck: setup
	$(BIN)/mypy beamtok pipelines examples

# the docs site (mkdocs.yml): guides, the CLI reference made from the option table, the API
# reference from docstrings, the performance page from benchmarks/results; any warning fails
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir build/site

# the suite on every core (pytest-xdist); a run that collects no test fails (pytest exit 5)
unit: setup
	$(BIN)/pytest -q -n auto --durations=25 tests

# the stage, format, state and error tests, without whole jobs (Beam builds, torchrun, DCP,
# JAX, notebooks, whole-corpus tokenizer checks, many-point sweeps: tests/slow_selection.py SLOW_MODULES,
# SLOW_TESTS and @slow)
test-fast: setup
	$(BIN)/pytest -q -n auto -m "not slow" tests

# the declared minimum of each core dependency (pyproject.toml), in an environment of its own:
# build a cache, verify and read it, stream and resume (floor/smoke.py)
FLOOR_VENV ?= .venv-floor
FLOOR_STAMP := $(FLOOR_VENV)/.beamtok-installed

$(FLOOR_STAMP): pyproject.toml floor/constraints.py
	$(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/pip install --quiet --upgrade pip
	$(PYTHON) floor/constraints.py > $(FLOOR_VENV)/constraints.txt
	$(FLOOR_VENV)/bin/pip install --quiet -c $(FLOOR_VENV)/constraints.txt -e '.[beam]'
	touch $(FLOOR_STAMP)

floor: $(FLOOR_STAMP)
	$(FLOOR_VENV)/bin/python floor/smoke.py

test: lint typecheck docs unit floor

# epochraft (a peer we compare against) and bpe-openai (an engine measured by engines.py)
# are installed only for the benchmarks
bench: setup
	$(BIN)/pip install --quiet epochraft bpe-openai
	test -x build/litdata-venv/bin/python || (python3 -m venv build/litdata-venv && build/litdata-venv/bin/pip install --quiet 'torch==2.13.0' litdata pyarrow tokenizers)
	cd benchmarks && ../$(BIN)/python run_all.py && ../$(BIN)/python resume.py && ../$(BIN)/python scale.py && ../$(BIN)/python fast_path.py --mb 40 --tokenizers gpt2,cl100k,o200k,qwen2,llama3-form --corpora prose,code && ../$(BIN)/python fast_path.py --mb 5 --tokenizers sp-bpe-metaspace,sp-bpe-prepend,wordpiece,unigram,llama3,cl100k-today --corpora prose,code --out fast_path_families.json && ../$(BIN)/python engines.py --mb 10 && ../$(BIN)/python engines.py --mb 10 --corpus code --out engines_code.json && ../$(BIN)/python as_you_go.py --mb 100 && ../$(BIN)/python beam_scale.py --mb 160 --rounds 3 && ../$(BIN)/python beam_scale.py --mb 640 --rounds 1 --out beam_scale_640.json --min-ratio 1.7 && ../$(BIN)/python shuffle_read.py --mb 40 && ../$(BIN)/python spread_read.py && ../$(BIN)/python internet_scale.py && ../$(BIN)/python packing.py --mb 10 && ../$(BIN)/python step_access.py && ../$(BIN)/python rank_states.py && ../$(BIN)/python parquet_encoding.py && ../$(BIN)/python build_cost.py --mb 40 --rounds 3 && ../$(BIN)/python dask_build.py --mb 80 --rounds 3 && ../$(BIN)/python read_vs_litdata.py --mb 40 --rounds 3 && ../$(BIN)/python tokenizer_copy.py && ../$(BIN)/python dataloader_ceiling.py && ../$(BIN)/python worker_start.py && ../$(BIN)/python chat_tokenize.py --conversations 10000 --rounds 3

# kill/resume soaks: 10x the shipped corpus, consumer SIGKILLed at random moments; then a mix
# of 3 sources read by 1, 2 or 4 ranks, the world size changing at random restarts; then the
# torchrun example, a random rank SIGKILLed 30 times, restarted on 1-4 ranks
# the GPU job's data path (NCCL + DCP, feeding a device, scaling over the cores); a few
# minutes on a 16-core machine with one GPU; without CUDA, parts 1 (on gloo) and 3
device-check: setup
	cd benchmarks && ../$(BIN)/python device_check.py

soak: setup
	cd benchmarks && ../$(BIN)/python soak.py && ../$(BIN)/python soak_elastic.py && ../$(BIN)/python soak_torchrun.py && ../$(BIN)/python soak_torchft.py

clean:
	rm -rf $(VENV) $(FLOOR_VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
