"""The schema revisions this program knows, oldest first; the last is the one it needs.

Kept as constants so that every command can check a store's revision with one SELECT instead of
loading Alembic; `tests/store/test_migrations.py` checks them against the migration scripts.
"""

REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011", "0012", "0013", "0014", "0015", "0016", "0017", "0018", "0019", "0020", "0021", "0022")
HEAD_REVISION = REVISIONS[-1]
