"""The evaluation suite: every utility metric of papers 000, 001 and 004 on a
real/synthetic pair (:func:`evaluate_tables`), and the run report with plots
(:func:`~flwr_vflgan.evaluation.report.write_report`)."""

from flwr_vflgan.evaluation.config import CLASSIFIERS, METRIC_GROUPS, EvaluationConfig
from flwr_vflgan.evaluation.suite import Evaluation, evaluate_tables

__all__ = ["CLASSIFIERS", "METRIC_GROUPS", "Evaluation", "EvaluationConfig", "evaluate_tables"]
