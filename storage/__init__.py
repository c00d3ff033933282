"""Storage: the tables (requests, feedback, versioned policy, sessions, orders, hand-offs, console logins) and the
Database that reads and writes them, on SQLite or any SQLAlchemy URL."""
