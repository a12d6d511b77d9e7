"""Subcommands of the gyreprof CLI: one module per command, each with register(subparsers)."""
