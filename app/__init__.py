"""Customer-facing app: the Gradio multimodal chat and the HTTP API, mounted in one FastAPI server."""
