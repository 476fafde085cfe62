"""The Messages API backend: the request, the stream reader and the backend itself."""
