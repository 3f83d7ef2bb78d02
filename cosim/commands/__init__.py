"""One module per `cosim` subcommand: ``add_parser(subparsers)`` and ``run(args)``."""
