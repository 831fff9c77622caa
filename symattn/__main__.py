"""``python -m symattn`` runs the command-line interface."""

from symattn.cli import main

raise SystemExit(main())
