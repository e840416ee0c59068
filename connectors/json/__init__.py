"""JSON: ``read_json`` (JSON Lines or a JSON array) and ``Dataset.write_json``,
with shardflow's own C parser of JSON Lines where it gives Arrow's table exactly."""
