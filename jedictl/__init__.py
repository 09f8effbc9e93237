"""jedictl: PanDA JEDI's agents as one command-line program over a SQLite or PostgreSQL store."""

__version__ = "0.1.0"
