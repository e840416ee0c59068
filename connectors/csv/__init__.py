"""CSV: ``read_csv`` and ``Dataset.write_csv`` through pyarrow.csv, with shardflow's
own C parser where it gives Arrow's table exactly."""
