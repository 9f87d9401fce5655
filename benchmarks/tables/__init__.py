"""The generated regions of the markdown files (generate.py), one module of renderers a family of tables."""
