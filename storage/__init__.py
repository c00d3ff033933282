"""Storage: the tables (requests, feedback, versioned policy, promoted routers, sessions, orders, hand-offs and who
holds each conversation, console logins, alerts and the ops audit trail) and the Database that reads and writes them,
on SQLite or any SQLAlchemy URL (PostgreSQL for several replicas)."""
