"""Orca's module layout (Analytics Zoo / BigDL ``orca``) over shardflow's XShards.

Code written for Orca's data API runs by changing its imports: ``from bigdl.orca.data
import XShards`` becomes ``from shardflow.orca.data import XShards``,
``bigdl.orca.data.pandas.read_csv`` becomes ``shardflow.orca.data.pandas.read_csv``, and
``from bigdl.orca import init_orca_context, stop_orca_context, OrcaContext`` becomes
``from shardflow.orca import ...``.
"""

from shardflow.engine.xshards.orca_context import OrcaContext, init_orca_context, stop_orca_context
from shardflow.orca import data

__all__ = ["OrcaContext", "data", "init_orca_context", "stop_orca_context"]
