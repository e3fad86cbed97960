"""Vertically partitioned multivariate time series: VFLGAN-TS (paper 003).

Each party holds some channels (attributes) of every series. The family's pieces:
``data`` (series tables, the sine datasets), ``models`` (per-channel generators with
shared noise, attribute discriminators, feature extractors, the shared discriminator),
``training`` (a party's and the server's half of a step) and ``metrics`` (discriminative
and predictive scores, amplitude correlation across parties).
"""
