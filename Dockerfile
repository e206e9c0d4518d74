# Worker image for running beamtok's Beam pipelines on Dataflow (or any portable runner).
#
# The base image's Beam and Python versions must match the launcher's: apache-beam 2.77.0 on
# Python 3.11, as pinned in pyproject.toml's `beam` extra. Keep the base image's ENTRYPOINT
# (/opt/apache/beam/boot): the runner starts the SDK harness through it.
#
#   docker build -t REGION-docker.pkg.dev/PROJECT/REPO/beamtok-worker:0.1.0 .
#   docker push REGION-docker.pkg.dev/PROJECT/REPO/beamtok-worker:0.1.0
#   ... --sdk_container_image=REGION-docker.pkg.dev/PROJECT/REPO/beamtok-worker:0.1.0
FROM apache/beam_python3.11_sdk:2.77.0

WORKDIR /opt/beamtok
COPY pyproject.toml setup.py README.md ./
COPY beamtok ./beamtok
# Workers tokenize and write Parquet; they need neither torch nor the test tools. The base
# image already holds apache-beam 2.77.0, so the `beam` extra installs nothing new; `compiled`
# (numba) runs Unigram (T5's, XLM-R's) and SentencePiece-style BPE (Llama-2's) compiled. The
# kernels are compiled into the image, so a worker on the same CPU family starts without
# compiling them (~17 s of CPU per worker process otherwise).
RUN pip install --no-cache-dir '.[beam,remote,compiled]' \
    && python -c "import beamtok, beamtok._src.beam.build, beamtok._src.engines.unigram_native, beamtok._src.engines.bpe_native, apache_beam; assert apache_beam.__version__ == '2.77.0'" \
    && python -m beamtok._src.engines.kernel_warmup
