"""Chat templates: Jinja2 from the model's files, rendered sandboxed (chat.py over sandbox.py and
filters.py) within a budget (limits.py); prompt.py fits a chat's prompt to the context."""
