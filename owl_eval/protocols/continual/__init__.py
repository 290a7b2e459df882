"""The continual protocol: its descriptor (protocol.py), driver, record, metrics, figures, agents, sources and configs."""
