"""`tracer run`: trace one spec or many, with every view of the result (table, attention heatmaps, JSON, CSV,
Markdown, --save, --verify).
"""
