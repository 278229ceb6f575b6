"""The ground floor every layer may import: typed settings, durations and the domain errors."""
