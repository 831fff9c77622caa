"""One printer per format, each a :class:`~symattn.document.printers.base.Printer` subclass."""
