"""`--executor ray`: a batch's jobs on a Ray cluster of one machine or many.

- `connect.py`: reach (or start) Ray before anything is written; a failure is one line with the fix.
- `placement.py`: what each job asks Ray for (a CPU share, `--ray-resources`, the task's own needs such as an
  OSWorld VM slot or a Docker engine) and the check, before the run, that some node has it.
- `shipping.py`: the inputs the driver names (`--root` task file, `--runner` module) travel with the jobs
  through Ray's object store; paths are resolved first.
- `nodes.py`: on each node, its own copy of the benchmark data, checked against the driver's dataset digest,
  and where a job ran (node id, host, provider instance).
- `worker.py`: one job on a node. `driver.py`: submit, retry a job once when its node dies, append rows.
"""

from qitos.run.cluster.connect import connect_ray
from qitos.run.cluster.driver import run_ray
from qitos.run.cluster.placement import check_placement, parse_resources

__all__ = ["check_placement", "connect_ray", "parse_resources", "run_ray"]
