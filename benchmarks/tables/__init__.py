"""The generated regions of the markdown files (generate.py): one module a family of tables, each naming the regions
it draws (`REGIONS`), all drawn by render.py."""
