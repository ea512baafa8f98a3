"""The shared backend for several replicas: PostgreSQL through an asyncpg pool (the
``postgres`` extra)."""
