"""Glue that lets other servers use our parser (see ``patches/`` for upstream TabbyAPI)."""
