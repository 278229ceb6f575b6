"""The ground floor: settings, durations and error types that every layer (collectors, db, app) may import."""
