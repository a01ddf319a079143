"""Multi-node launch on the REAL dev cluster: srun starts one task per GPU on gh1 and gh2
(runtime none), each task gets RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, and
the rendezvous really works: the two ranks join one torch.distributed (gloo) group through
MASTER_ADDR:MASTER_PORT and all-reduce. Submitted through the real CLI; nothing is mocked."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from orchestrator.store import Store
from tests import devcluster

pytestmark = pytest.mark.cluster

RANK_SCRIPT = """\
import datetime, os, socket
import torch, torch.distributed as dist
e = os.environ
print(f"GHR rank={e['RANK']} world={e['WORLD_SIZE']} local={e['LOCAL_RANK']} "
      f"master={e['MASTER_ADDR']} port={e['MASTER_PORT']} node={e['SLURMD_NODENAME']} "
      f"host={socket.gethostname()}", flush=True)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
t = torch.tensor([int(e["RANK"]) + 1])
dist.all_reduce(t)
print(f"GHR allreduce rank={e['RANK']} sum={int(t.item())}", flush=True)
dist.destroy_process_group()
"""


def _node_addr(node: str) -> str:
    res = subprocess.run(
        ["scontrol", "show", "node", node],
        env=devcluster.slurm_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    m = re.search(r"NodeAddr=(\S+)", res.stdout)
    assert m, res.stdout
    return m.group(1)


def test_two_nodes_rendezvous(dev_cluster, cli, gh_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spec = tmp_path / "multinode.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "multinode",
                "cluster": "dev",
                "partition": "gh",
                "resources": {"nodes": 2, "gpus_per_node": 1, "time": "00:03:00"},
                "container": {"runtime": "none"},
                "workload": {"command": "python3", "args": ["-c", RANK_SCRIPT]},
                "artifacts": [],
            }
        )
    )
    res = cli("submit", str(spec), "--executor", "slurm", "--wait", "--timeout", "150")
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    text = "".join(p.read_text() for p in Path(run.run_dir).glob(f"{run.job_id}_*_log.out"))
    ranks = {
        m["rank"]: m.groupdict()
        for m in re.finditer(
            r"GHR rank=(?P<rank>\d+) world=(?P<world>\d+) local=(?P<local>\d+) "
            r"master=(?P<master>\S+) port=(?P<port>\d+) node=(?P<node>\S+)",
            text,
        )
    }
    assert set(ranks) == {"0", "1"}, text
    assert {r["world"] for r in ranks.values()} == {"2"}
    assert {r["local"] for r in ranks.values()} == {"0"}  # one task per GPU, one GPU per node
    assert {r["node"] for r in ranks.values()} == {"gh1", "gh2"}
    masters = {r["master"] for r in ranks.values()}
    assert masters == {_node_addr("gh1")}, text  # the first node's address, not its name
    assert len({r["port"] for r in ranks.values()}) == 1
    sums = set(re.findall(r"GHR allreduce rank=\d sum=(\d+)", text))
    assert sums == {"3"}, text  # 1 + 2: both ranks met through MASTER_ADDR:MASTER_PORT
