"""Readers of serving-benchmark result files, one module per family of formats, each returning
`common.BenchmarkRun`s. `serve.benchmarks.read_benchmarks` tells the formats apart by content
and calls them; nothing here reads a file."""
