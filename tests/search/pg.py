"""Fresh PostgreSQL databases for tests, on the server this machine runs at 127.0.0.1:5432."""

import contextlib
import uuid

import sqlalchemy

ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


@contextlib.contextmanager
def fresh_database(host_port: str = "127.0.0.1:5432"):
    """Create a uniquely named database, yield its URL, drop it afterwards (closing leftover connections)."""
    name = f"prism_test_{uuid.uuid4().hex[:10]}"
    admin = sqlalchemy.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT", poolclass=sqlalchemy.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql+psycopg://postgres@{host_port}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
