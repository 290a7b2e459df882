"""Comparing agents over seeds, in one place: which runs are averaged together and what each agent is called
(``grouping``), the table of means with their intervals (``table``), which agent is better, by how much and how
sure (``verdict``), every text a person reads (``text``), the figures (``figures``), the HTML report (``report``),
the one writer of every file and parent-run artifact (``outputs``), reading a store (``store``), the
``owl-eval-compare`` command (``cli``) and the end of a sweep (``sweep_end``).

Numbers are exact everywhere but in text; an agent has one label and a metric one display name in every output.
"""
