"""AIM and MST, the marginal-based DP synthesizers, as centralized baselines
(``algorithm=aim``, ``algorithm=mst``; the optional ``mbi`` package fits their models).

:mod:`~flwr_vflgan.marginals.discretize` turns a table into codes from public metadata,
:mod:`~flwr_vflgan.marginals.mechanisms` holds the two mechanisms and
:mod:`~flwr_vflgan.marginals.synthesis` runs one on a table and decodes what it samples.
"""
