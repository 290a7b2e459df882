"""owl-eval-selective: selective classification (risk-coverage, AURC, E-AURC) as an owl-eval protocol.

Parts: the descriptor (protocol.py), driver, record, metric functions (metrics.py, each reported one declared by
its decorator; specs.py holds the set they register in and the names), typed metric options, evaluation, figures,
the baseline agent (agents.py) and the configs (conf/).
"""
