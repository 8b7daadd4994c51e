"""``python -m diagnose`` runs the CLI."""

from diagnose.cli import main

main()
