"""Exchanges: shuffles, sorts, aggregations, repartitions and joins (see base.py)."""
