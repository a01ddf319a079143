"""Multi-node launch on the REAL dev cluster: srun starts one task per GPU on gh1 and gh2
(runtime none), each task gets RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, and
the rendezvous really works: the ranks join one torch.distributed (gloo) group through
MASTER_ADDR:MASTER_PORT and all-reduce. Both dev nodes have NodeAddr 127.0.0.1, so the master
is also checked by name (MASTER_NODE) against the first host of the allocation as the controller
reports it. Submitted through the real CLI; nothing is mocked."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from orchestrator.store.db import Store
from tests import devcluster

pytestmark = pytest.mark.cluster

RANK_SCRIPT = """\
import datetime, os, socket
import torch, torch.distributed as dist
e = os.environ
print(f"GHR rank={e['RANK']} world={e['WORLD_SIZE']} local={e['LOCAL_RANK']} "
      f"noderank={e['NODE_RANK']} procid={e['SLURM_PROCID']} localid={e['SLURM_LOCALID']} "
      f"master={e['MASTER_ADDR']} masternode={e['MASTER_NODE']} port={e['MASTER_PORT']} "
      f"node={e['SLURMD_NODENAME']} host={socket.gethostname()}", flush=True)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
t = torch.tensor([int(e["RANK"]) + 1])
dist.all_reduce(t)
print(f"GHR allreduce rank={e['RANK']} sum={int(t.item())}", flush=True)
dist.destroy_process_group()
"""
LINE = re.compile(
    r"GHR rank=(?P<rank>\d+) world=(?P<world>\d+) local=(?P<local>\d+) "
    r"noderank=(?P<noderank>\d+) procid=(?P<procid>\d+) localid=(?P<localid>\d+) "
    r"master=(?P<master>\S+) masternode=(?P<masternode>\S+) port=(?P<port>\d+) "
    r"node=(?P<node>\S+)"
)


def _scontrol(*args: str) -> str:
    res = subprocess.run(
        ["scontrol", *args],
        env=devcluster.slurm_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return res.stdout


def _node_addr(node: str) -> str:
    m = re.search(r"NodeAddr=(\S+)", _scontrol("show", "node", node))
    assert m, node
    return m.group(1)


def _allocation(job_id: str) -> list[str]:
    """The job's nodes in allocation order, from the controller (NodeList, expanded)."""
    m = re.search(r"\bNodeList=(\S+)", _scontrol("show", "job", "-o", job_id))
    assert m and m.group(1) != "(null)", job_id
    return _scontrol("show", "hostnames", m.group(1)).split()


@pytest.mark.parametrize(
    ("resources", "per_node"),
    [
        ({"gpus_per_node": 1}, 1),  # one task per GPU, one GPU per node
        ({"gpus_per_node": 1, "ntasks_per_node": 2}, 2),  # two ranks per node: LOCAL_RANK 0, 1
    ],
    ids=["1x2", "2x2"],
)
def test_two_nodes_rendezvous(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, tmp_path: Path, resources: dict[str, int], per_node: int
) -> None:
    spec = tmp_path / "multinode.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "multinode",
                "cluster": "dev",
                "partition": "gh",
                "resources": {"nodes": 2, "time": "00:03:00", **resources},
                "container": {"runtime": "none"},
                "workload": {"command": "python3", "args": ["-c", RANK_SCRIPT]},
                "artifacts": [],
            }
        )
    )
    res = cli("submit", str(spec), "--executor", "slurm", "--wait", "--timeout", "150")
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    assert run.job_id
    text = "".join(p.read_text() for p in Path(run.run_dir).glob(f"{run.job_id}_*_log.out"))
    ranks = {int(m["rank"]): m.groupdict() for m in LINE.finditer(text)}
    world = 2 * per_node
    assert set(ranks) == set(range(world)), text
    for rank in range(world):  # `logs --rank N` is task N's own log, and only its
        own = cli("logs", run.run_id, "--rank", str(rank))
        assert own.rc == 0, own.text
        assert {int(m["rank"]) for m in LINE.finditer(own.out)} == {rank}, own.out
    hosts = _allocation(run.job_id)
    assert sorted(hosts) == ["gh1", "gh2"], hosts
    first = hosts[0]
    for rank, r in ranks.items():
        # Each task's own variables: from SLURM's task identity, block distribution.
        assert int(r["procid"]) == rank, r
        assert int(r["world"]) == world, r
        assert r["local"] == r["localid"], r
        assert int(r["noderank"]) == hosts.index(r["node"]), r
        assert rank == int(r["noderank"]) * per_node + int(r["local"]), r
        # The rendezvous: the FIRST host of the allocation, by name (both dev nodes have
        # NodeAddr 127.0.0.1, so the address alone cannot tell), and that host's address.
        assert r["masternode"] == first, (r, hosts)
        assert r["master"] == _node_addr(first), r
    assert {(r["node"], r["local"]) for r in ranks.values()} == {
        (h, str(i)) for h in hosts for i in range(per_node)
    }
    assert ranks[0]["node"] == first  # rank 0, which hosts the store, runs on the master node
    assert len({r["port"] for r in ranks.values()}) == 1
    sums = set(re.findall(r"GHR allreduce rank=\d+ sum=(\d+)", text))
    assert sums == {str(world * (world + 1) // 2)}, text  # all ranks met through MASTER_ADDR:PORT
