"""View primitives shared by every command: number formats, plain-text tables, CSV and Markdown writers, the
rich tables of a trace, the JSON and .npz encodings of a trace, SVG/HTML export.  No feature is imported here.
"""
