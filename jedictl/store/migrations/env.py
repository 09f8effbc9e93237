"""Alembic environment: always run on the connection jedictl passes in (see store/migrate.py)."""

from alembic import context

from jedictl.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reachable by running alembic by hand
    raise RuntimeError("run migrations through `jedictl db upgrade`")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=True,
    transactional_ddl=True,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
