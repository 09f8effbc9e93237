"""The store: tables, connections, leases and the named operations the engine calls."""
