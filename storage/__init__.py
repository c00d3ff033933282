"""Storage: SQLModel tables (requests, feedback, versioned router settings, sessions, orders) on SQLite or any SQLAlchemy URL."""
