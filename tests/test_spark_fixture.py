def test_spark_session_runs_a_job(spark):
    df = spark.createDataFrame([(i, str(i)) for i in range(10)], ["a", "b"])
    assert df.groupBy().sum("a").collect()[0][0] == 45
    assert df.toPandas()["b"].tolist() == [str(i) for i in range(10)]
