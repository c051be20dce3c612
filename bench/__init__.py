"""Benchmarks, and the peer tools they (and some tests) compare against."""
