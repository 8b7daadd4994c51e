"""``python -m diagnose`` runs the CLI, started the same way as the console script."""

from diagnose.launch import diagnose

diagnose()
