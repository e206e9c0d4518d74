"""beamtok: tokenize and pack LLM training data on the fly or through an Apache Beam cache."""

from setuptools import find_packages, setup

BEAM = ["apache-beam==2.77.0"]
DATAFLOW = ["apache-beam[gcp]==2.77.0"]
TORCH = ["torch>=2.1"]
HF = ["datasets>=2.14"]
REMOTE = ["smart-open[s3,gcs,http]>=7"]
TIKTOKEN = ["tiktoken>=0.7"]
DEV = [
    "pytest>=8",
    "pytest-timeout>=2.3",
    "hypothesis>=6.100",
    "ruff>=0.6",
    "mypy>=1.10",
    "moto[server]>=5",
    "duckdb>=1.0",
    "types-PyYAML",
]

setup(
    name="beamtok",
    version="0.1.0",
    description="Tokenize and pack LLM training data on the fly or from a Beam-built Parquet cache, resumably.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["beamtok", "beamtok.*", "pipelines", "pipelines.*"]),
    install_requires=[
        "numpy>=1.24,<2.5",
        "pyarrow>=14,<26",
        "tokenizers>=0.19",
        "transformers>=4.40",
        "braceexpand>=0.1.7",
        "smart-open>=7",
        "zstandard>=0.22",
        "click>=8.1",
        "pyyaml>=6",
        "cloudpickle>=2.2",
        "jinja2>=3.1",
    ],
    extras_require={
        "beam": BEAM,
        "dataflow": DATAFLOW,
        "torch": TORCH,
        "hf": HF,
        "remote": REMOTE,
        "tiktoken": TIKTOKEN,
        "all": BEAM + TORCH + HF + REMOTE + TIKTOKEN,
        "dev": DEV,
    },
    entry_points={"console_scripts": ["beamtok=beamtok.cli:main"]},
    include_package_data=True,
)
