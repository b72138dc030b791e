"""The Celery workers: they cut buffered messages into chunks, embed and store them."""
