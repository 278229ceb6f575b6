"""Collectors: scrape a source, parse it, return typed records (collectors.records). No storage here."""
