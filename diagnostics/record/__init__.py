"""The trace record: the recorder that folds an exchange into it, its schema and versions, frame shapes and the request summary."""
