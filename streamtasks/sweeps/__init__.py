"""Scenario sweeps on Spark (see docs/spark.md)."""
