"""The HTTP API's data: request and event models per provider, their errors, and prompt rendering."""
