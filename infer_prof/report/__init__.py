"""Presentation: console tables, live progress, HTML report."""
