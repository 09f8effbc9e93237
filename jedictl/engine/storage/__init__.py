"""Storage you can touch: where a replica lives on an endpoint with a URL, checksums, and moving files."""
