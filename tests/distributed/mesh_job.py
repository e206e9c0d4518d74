"""A job run under torchrun by tests/distributed/test_device_mesh.py: ranks on a 2-D device mesh (data
parallel x tensor parallel, gloo on CPU). The loader splits the data over the mesh's
data-parallel dimension (``DistributedLoader(ds, group=mesh["dp"])``); a linear layer is
sharded column-wise over the tensor-parallel one and saved in the same DCP checkpoint. Phase
``save`` reads some batches and saves; phase ``resume`` loads on this mesh and reads to the
end. Each rank writes what it read to ``ROOT/rows-PHASE-RANK.json`` with its mesh coordinate."""

from __future__ import annotations

import argparse
import gc
import json
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

from beamtok import Dataset
from beamtok._src.distributed.process_group import start_process_group
from beamtok._src.distributed.torch_loader import DistributedLoader


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 16)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--phase", choices=["save", "resume"], required=True)
    parser.add_argument("--tp", type=int, default=2)
    args = parser.parse_args()
    start_process_group("gloo")
    root = Path(args.root)
    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (world // args.tp, args.tp), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = parallelize_module(Model(), mesh["tp"], {"proj": ColwiseParallel()})
    files = sorted(str(p) for p in (root / "data").glob("part-*.jsonl"))
    ds = Dataset.from_files(files).tokenize(args.tokenizer).ensure_bos_eos().concat_chunk(32).batch(4)
    loader = DistributedLoader(ds, group=mesh["dp"], even="pad")
    state = {"data": loader, "model": _ModelState(model)}
    rows: list[list[int]] = []
    if args.phase == "resume":
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
        dcp.load(state, checkpoint_id=str(root / "ckpt"))
    for step, batch in enumerate(loader):
        rows.append([[int(s), int(i)] for s, i in zip(batch["shard"].tolist(), batch["index"].tolist())])
        dist.barrier()
        if args.phase == "save" and step == 2:
            break
    if args.phase == "save":
        dcp.save(state, checkpoint_id=str(root / "ckpt"))
    weight = model.proj.weight.full_tensor()
    coordinate = mesh.get_coordinate()
    out = {"dp": coordinate[0], "tp": coordinate[1], "rows": rows, "weight": weight.sum().item()}
    (root / f"rows-{args.phase}-{dist.get_rank()}.json").write_text(json.dumps(out))
    dist.barrier()
    del model, loader, state
    gc.collect()
    dist.destroy_process_group()


class _ModelState:
    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def state_dict(self) -> dict:
        return get_model_state_dict(self.model)

    def load_state_dict(self, state_dict: dict) -> None:
        set_model_state_dict(self.model, state_dict)


if __name__ == "__main__":
    main()
