"""XShards on Spark: the SparkSession, the RDD-backed XShards class, its shuffles, its
Spark DataFrame conversions and pickle files (after ``init_orca_context(backend="spark")``)."""
