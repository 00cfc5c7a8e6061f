"""Figures (matplotlib is an optional extra: ``pip install "dpopt[plot]"``); one module per model family."""
