"""Writing outputs safely: files written whole, folders swapped whole, and text escaped for each format it is written in."""
