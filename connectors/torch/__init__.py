"""``from_torch``: a map-style torch Dataset read in parallel (extra
``shardflow[torch]``)."""
