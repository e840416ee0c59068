"""Orca's module layout (Analytics Zoo / BigDL ``orca``) over shardflow's XShards.

Code written for Orca's data API runs by changing its imports: ``from bigdl.orca.data
import XShards`` becomes ``from shardflow.orca.data import XShards``, and
``bigdl.orca.data.pandas.read_csv`` becomes ``shardflow.orca.data.pandas.read_csv``.
"""

from shardflow.orca import data

__all__ = ["data"]
