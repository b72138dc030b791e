"""The FastAPI service: /save, /retrieve and the management endpoints."""
