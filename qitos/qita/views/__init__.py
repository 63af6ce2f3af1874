"""One module per board page: each turns a request into a template context and renders it."""
