"""PyTorch microbenchmarks that time the shapes the calculator models (imported only by `roofline measure`)."""
