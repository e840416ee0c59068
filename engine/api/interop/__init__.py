"""Hand-offs between shardflow and the frameworks around a pipeline: Dask, Spark, Modin,
TensorFlow, PyTorch and Ray Data / Ray Train, one module each (``from_<system>`` functions
and the ``Dataset.to_<system>`` methods' work). Each imports its library only when used."""
