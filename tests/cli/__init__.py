"""The command line: each subcommand's output, exit status and bad input, run in-process."""
