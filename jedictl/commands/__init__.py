"""One module per command or command group; `jedictl.cli` registers them explicitly."""
