"""The composition root: the app, its resources, and serving it under uvicorn."""
