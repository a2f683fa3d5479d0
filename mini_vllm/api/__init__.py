"""The HTTP API's data: request and response models per provider, their errors, and prompt rendering."""
